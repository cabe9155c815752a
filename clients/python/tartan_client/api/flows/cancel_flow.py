from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.flow_cancelled import FlowCancelled
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: str,
    *,
    compensate: bool | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["compensate"] = compensate

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/engine/flow/{id}/cancel".format(
            id=quote(str(id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> FlowCancelled | Problem | None:
    if response.status_code == 202:
        response_202 = FlowCancelled.from_dict(response.json())

        return response_202

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 415:
        response_415 = Problem.from_dict(response.json())

        return response_415

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[FlowCancelled | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    compensate: bool | Unset = UNSET,
) -> Response[FlowCancelled | Problem]:
    """Cancel an active flow.

     Answers `202` once the flow is cancelled: pending work items are
    cancelled, calls in flight aborted wherever they run, and the succeeded
    items of running steps compensated. `?compensate=false` kills the flow
    instead: nothing is compensated. A flow that is over is a `409`. No
    body; send `Content-Type: application/json` all the same, as on every
    `POST`.

    Args:
        id (str):
        compensate (bool | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FlowCancelled | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        compensate=compensate,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    compensate: bool | Unset = UNSET,
) -> FlowCancelled | Problem | None:
    """Cancel an active flow.

     Answers `202` once the flow is cancelled: pending work items are
    cancelled, calls in flight aborted wherever they run, and the succeeded
    items of running steps compensated. `?compensate=false` kills the flow
    instead: nothing is compensated. A flow that is over is a `409`. No
    body; send `Content-Type: application/json` all the same, as on every
    `POST`.

    Args:
        id (str):
        compensate (bool | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FlowCancelled | Problem
    """

    return sync_detailed(
        id=id,
        client=client,
        compensate=compensate,
    ).parsed


async def asyncio_detailed(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    compensate: bool | Unset = UNSET,
) -> Response[FlowCancelled | Problem]:
    """Cancel an active flow.

     Answers `202` once the flow is cancelled: pending work items are
    cancelled, calls in flight aborted wherever they run, and the succeeded
    items of running steps compensated. `?compensate=false` kills the flow
    instead: nothing is compensated. A flow that is over is a `409`. No
    body; send `Content-Type: application/json` all the same, as on every
    `POST`.

    Args:
        id (str):
        compensate (bool | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FlowCancelled | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        compensate=compensate,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    compensate: bool | Unset = UNSET,
) -> FlowCancelled | Problem | None:
    """Cancel an active flow.

     Answers `202` once the flow is cancelled: pending work items are
    cancelled, calls in flight aborted wherever they run, and the succeeded
    items of running steps compensated. `?compensate=false` kills the flow
    instead: nothing is compensated. A flow that is over is a `409`. No
    body; send `Content-Type: application/json` all the same, as on every
    `POST`.

    Args:
        id (str):
        compensate (bool | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FlowCancelled | Problem
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            compensate=compensate,
        )
    ).parsed
