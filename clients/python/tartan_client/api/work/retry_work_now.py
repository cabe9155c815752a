from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.work_retried import WorkRetried
from ...types import Response


def _get_kwargs(
    id: str,
    token: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/engine/flow/{id}/work/{token}/retry".format(
            id=quote(str(id), safe=""),
            token=quote(str(token), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | WorkRetried | None:
    if response.status_code == 202:
        response_202 = WorkRetried.from_dict(response.json())

        return response_202

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
) -> Response[Problem | WorkRetried]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    id: str,
    token: str,
    *,
    client: AuthenticatedClient | Client,
) -> Response[Problem | WorkRetried]:
    """Start a work item's retry now.

     For an item waiting for a retry that is not yet due (a long backoff, a
    far `Retry-After`) when waiting is pointless: the step was fixed, the
    outage is over. Its next attempt starts at once, as it would have when
    due: the predicate and its step's health are judged as then, and the
    attempt counts against its retries. The flow's events record it
    (`work_retry_hastened`, with the time the retry was due), and the
    attempt whose wait was cut short shows `hastened_at`. A `409` when the
    flow is not active or the item is not waiting for a retry (running,
    finished, parked, or waiting for its step's health); no body is read.

    Args:
        id (str):
        token (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | WorkRetried]
    """

    kwargs = _get_kwargs(
        id=id,
        token=token,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: str,
    token: str,
    *,
    client: AuthenticatedClient | Client,
) -> Problem | WorkRetried | None:
    """Start a work item's retry now.

     For an item waiting for a retry that is not yet due (a long backoff, a
    far `Retry-After`) when waiting is pointless: the step was fixed, the
    outage is over. Its next attempt starts at once, as it would have when
    due: the predicate and its step's health are judged as then, and the
    attempt counts against its retries. The flow's events record it
    (`work_retry_hastened`, with the time the retry was due), and the
    attempt whose wait was cut short shows `hastened_at`. A `409` when the
    flow is not active or the item is not waiting for a retry (running,
    finished, parked, or waiting for its step's health); no body is read.

    Args:
        id (str):
        token (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | WorkRetried
    """

    return sync_detailed(
        id=id,
        token=token,
        client=client,
    ).parsed


async def asyncio_detailed(
    id: str,
    token: str,
    *,
    client: AuthenticatedClient | Client,
) -> Response[Problem | WorkRetried]:
    """Start a work item's retry now.

     For an item waiting for a retry that is not yet due (a long backoff, a
    far `Retry-After`) when waiting is pointless: the step was fixed, the
    outage is over. Its next attempt starts at once, as it would have when
    due: the predicate and its step's health are judged as then, and the
    attempt counts against its retries. The flow's events record it
    (`work_retry_hastened`, with the time the retry was due), and the
    attempt whose wait was cut short shows `hastened_at`. A `409` when the
    flow is not active or the item is not waiting for a retry (running,
    finished, parked, or waiting for its step's health); no body is read.

    Args:
        id (str):
        token (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | WorkRetried]
    """

    kwargs = _get_kwargs(
        id=id,
        token=token,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: str,
    token: str,
    *,
    client: AuthenticatedClient | Client,
) -> Problem | WorkRetried | None:
    """Start a work item's retry now.

     For an item waiting for a retry that is not yet due (a long backoff, a
    far `Retry-After`) when waiting is pointless: the step was fixed, the
    outage is over. Its next attempt starts at once, as it would have when
    due: the predicate and its step's health are judged as then, and the
    attempt counts against its retries. The flow's events record it
    (`work_retry_hastened`, with the time the retry was due), and the
    attempt whose wait was cut short shows `hastened_at`. A `409` when the
    flow is not active or the item is not waiting for a retry (running,
    finished, parked, or waiting for its step's health); no body is read.

    Args:
        id (str):
        token (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | WorkRetried
    """

    return (
        await asyncio_detailed(
            id=id,
            token=token,
            client=client,
        )
    ).parsed
