from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.health import Health
from ...models.problem import Problem
from ...types import Response


def _get_kwargs() -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/health",
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Health | Problem | None:
    if response.status_code == 200:
        response_200 = Health.from_dict(response.json())

        return response_200

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Health | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
) -> Response[Health | Problem]:
    """Liveness, with the version, store, node id and call counts.

     `200` whenever the process serves requests, without waiting on the
    database (for that, `GET /ready`). `details` has the version, the store,
    the node id, the active flows and timers, the calls in flight, queued
    and deferred against their limits, and, as Argyll's does, the backend
    and the streams open. `X-Argyll-Raft-State` is `leader` while the
    engine takes writes (as last found, looked at again in the background
    at most once a second), else `follower`: Argyll's HAProxy configuration
    sends writes by it. Open: no token needed.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Health | Problem]
    """

    kwargs = _get_kwargs()

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
) -> Health | Problem | None:
    """Liveness, with the version, store, node id and call counts.

     `200` whenever the process serves requests, without waiting on the
    database (for that, `GET /ready`). `details` has the version, the store,
    the node id, the active flows and timers, the calls in flight, queued
    and deferred against their limits, and, as Argyll's does, the backend
    and the streams open. `X-Argyll-Raft-State` is `leader` while the
    engine takes writes (as last found, looked at again in the background
    at most once a second), else `follower`: Argyll's HAProxy configuration
    sends writes by it. Open: no token needed.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Health | Problem
    """

    return sync_detailed(
        client=client,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
) -> Response[Health | Problem]:
    """Liveness, with the version, store, node id and call counts.

     `200` whenever the process serves requests, without waiting on the
    database (for that, `GET /ready`). `details` has the version, the store,
    the node id, the active flows and timers, the calls in flight, queued
    and deferred against their limits, and, as Argyll's does, the backend
    and the streams open. `X-Argyll-Raft-State` is `leader` while the
    engine takes writes (as last found, looked at again in the background
    at most once a second), else `follower`: Argyll's HAProxy configuration
    sends writes by it. Open: no token needed.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Health | Problem]
    """

    kwargs = _get_kwargs()

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
) -> Health | Problem | None:
    """Liveness, with the version, store, node id and call counts.

     `200` whenever the process serves requests, without waiting on the
    database (for that, `GET /ready`). `details` has the version, the store,
    the node id, the active flows and timers, the calls in flight, queued
    and deferred against their limits, and, as Argyll's does, the backend
    and the streams open. `X-Argyll-Raft-State` is `leader` while the
    engine takes writes (as last found, looked at again in the background
    at most once a second), else `follower`: Argyll's HAProxy configuration
    sends writes by it. Open: no token needed.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Health | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
        )
    ).parsed
