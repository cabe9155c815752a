from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.flow_retried import FlowRetried
from ...models.problem import Problem
from ...models.retry_body import RetryBody
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: str,
    *,
    body: None | RetryBody | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/engine/flow/{id}/retry".format(
            id=quote(str(id), safe=""),
        ),
    }

    if isinstance(body, RetryBody):
        _kwargs["json"] = body.to_dict()
    else:
        _kwargs["json"] = body

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> FlowRetried | Problem | None:
    if response.status_code == 202:
        response_202 = FlowRetried.from_dict(response.json())

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

    if response.status_code == 408:
        response_408 = Problem.from_dict(response.json())

        return response_408

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())

        return response_413

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
) -> Response[FlowRetried | Problem]:
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
    body: None | RetryBody | Unset = UNSET,
) -> Response[FlowRetried | Problem]:
    """Run a failed or cancelled flow again from where it stopped.

     Answers `202` once the flow is active again under the same id: work
    items that did not succeed start over, succeeded ones keep their outputs,
    and the flow's timeout counts again from now. `reset_attempts` (default
    `true`) counts the restarted items' attempts from 1 again. A flow that
    is active, completed or still deactivating is a `409`, and so is a
    sub-flow (retry its parent). The body is optional, at most 4 KiB.

    Args:
        id (str):
        body (None | RetryBody | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FlowRetried | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: None | RetryBody | Unset = UNSET,
) -> FlowRetried | Problem | None:
    """Run a failed or cancelled flow again from where it stopped.

     Answers `202` once the flow is active again under the same id: work
    items that did not succeed start over, succeeded ones keep their outputs,
    and the flow's timeout counts again from now. `reset_attempts` (default
    `true`) counts the restarted items' attempts from 1 again. A flow that
    is active, completed or still deactivating is a `409`, and so is a
    sub-flow (retry its parent). The body is optional, at most 4 KiB.

    Args:
        id (str):
        body (None | RetryBody | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FlowRetried | Problem
    """

    return sync_detailed(
        id=id,
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: None | RetryBody | Unset = UNSET,
) -> Response[FlowRetried | Problem]:
    """Run a failed or cancelled flow again from where it stopped.

     Answers `202` once the flow is active again under the same id: work
    items that did not succeed start over, succeeded ones keep their outputs,
    and the flow's timeout counts again from now. `reset_attempts` (default
    `true`) counts the restarted items' attempts from 1 again. A flow that
    is active, completed or still deactivating is a `409`, and so is a
    sub-flow (retry its parent). The body is optional, at most 4 KiB.

    Args:
        id (str):
        body (None | RetryBody | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FlowRetried | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    body: None | RetryBody | Unset = UNSET,
) -> FlowRetried | Problem | None:
    """Run a failed or cancelled flow again from where it stopped.

     Answers `202` once the flow is active again under the same id: work
    items that did not succeed start over, succeeded ones keep their outputs,
    and the flow's timeout counts again from now. `reset_attempts` (default
    `true`) counts the restarted items' attempts from 1 again. A flow that
    is active, completed or still deactivating is a `409`, and so is a
    sub-flow (retry its parent). The body is optional, at most 4 KiB.

    Args:
        id (str):
        body (None | RetryBody | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FlowRetried | Problem
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
        )
    ).parsed
