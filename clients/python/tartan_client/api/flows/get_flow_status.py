from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.flow_status_answer import FlowStatusAnswer
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: str,
    *,
    wait: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["wait"] = wait

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/engine/flow/{id}/status".format(
            id=quote(str(id), safe=""),
        ),
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> FlowStatusAnswer | Problem | None:
    if response.status_code == 200:
        response_200 = FlowStatusAnswer.from_dict(response.json())

        return response_200

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

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[FlowStatusAnswer | Problem]:
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
    wait: str | Unset = UNSET,
) -> Response[FlowStatusAnswer | Problem]:
    """The flow's status alone; with `wait`, once the flow finishes.

     Without `wait`, the status from the flow's row, at once. With
    `?wait=30s` (milliseconds or any duration, at most 60 s) the answer
    comes as soon as the flow is no longer `active`, or after the wait with
    `"status": "active"` if it still is: one request instead of polling.
    At most 10,000 requests wait at once per process; more are a `503`.

    Args:
        id (str):
        wait (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FlowStatusAnswer | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        wait=wait,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    wait: str | Unset = UNSET,
) -> FlowStatusAnswer | Problem | None:
    """The flow's status alone; with `wait`, once the flow finishes.

     Without `wait`, the status from the flow's row, at once. With
    `?wait=30s` (milliseconds or any duration, at most 60 s) the answer
    comes as soon as the flow is no longer `active`, or after the wait with
    `"status": "active"` if it still is: one request instead of polling.
    At most 10,000 requests wait at once per process; more are a `503`.

    Args:
        id (str):
        wait (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FlowStatusAnswer | Problem
    """

    return sync_detailed(
        id=id,
        client=client,
        wait=wait,
    ).parsed


async def asyncio_detailed(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    wait: str | Unset = UNSET,
) -> Response[FlowStatusAnswer | Problem]:
    """The flow's status alone; with `wait`, once the flow finishes.

     Without `wait`, the status from the flow's row, at once. With
    `?wait=30s` (milliseconds or any duration, at most 60 s) the answer
    comes as soon as the flow is no longer `active`, or after the wait with
    `"status": "active"` if it still is: one request instead of polling.
    At most 10,000 requests wait at once per process; more are a `503`.

    Args:
        id (str):
        wait (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FlowStatusAnswer | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        wait=wait,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    wait: str | Unset = UNSET,
) -> FlowStatusAnswer | Problem | None:
    """The flow's status alone; with `wait`, once the flow finishes.

     Without `wait`, the status from the flow's row, at once. With
    `?wait=30s` (milliseconds or any duration, at most 60 s) the answer
    comes as soon as the flow is no longer `active`, or after the wait with
    `"status": "active"` if it still is: one request instead of polling.
    At most 10,000 requests wait at once per process; more are a `503`.

    Args:
        id (str):
        wait (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FlowStatusAnswer | Problem
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            wait=wait,
        )
    ).parsed
