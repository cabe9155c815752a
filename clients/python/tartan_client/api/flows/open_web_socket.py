from http import HTTPStatus
from typing import Any, cast

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    access_token: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["access_token"] = access_token

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/engine/ws",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Any | Problem | None:
    if response.status_code == 101:
        response_101 = cast(Any, None)
        return response_101

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Any | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    access_token: str | Unset = UNSET,
) -> Response[Any | Problem]:
    """Argyll's WebSocket: subscribe to the catalog, the cluster and flows.

     Upgrades the connection; a subscription gets the aggregate's state, then
    its events as they are committed. A browser, whose `WebSocket` cannot
    set `Authorization`, passes its token as `access_token`; a page of an
    origin not in `TARTAN_CORS_ORIGINS` is refused. A `503` when the process
    serves its most streams.

    Args:
        access_token (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
    """

    kwargs = _get_kwargs(
        access_token=access_token,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    access_token: str | Unset = UNSET,
) -> Any | Problem | None:
    """Argyll's WebSocket: subscribe to the catalog, the cluster and flows.

     Upgrades the connection; a subscription gets the aggregate's state, then
    its events as they are committed. A browser, whose `WebSocket` cannot
    set `Authorization`, passes its token as `access_token`; a page of an
    origin not in `TARTAN_CORS_ORIGINS` is refused. A `503` when the process
    serves its most streams.

    Args:
        access_token (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
    """

    return sync_detailed(
        client=client,
        access_token=access_token,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    access_token: str | Unset = UNSET,
) -> Response[Any | Problem]:
    """Argyll's WebSocket: subscribe to the catalog, the cluster and flows.

     Upgrades the connection; a subscription gets the aggregate's state, then
    its events as they are committed. A browser, whose `WebSocket` cannot
    set `Authorization`, passes its token as `access_token`; a page of an
    origin not in `TARTAN_CORS_ORIGINS` is refused. A `503` when the process
    serves its most streams.

    Args:
        access_token (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
    """

    kwargs = _get_kwargs(
        access_token=access_token,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    access_token: str | Unset = UNSET,
) -> Any | Problem | None:
    """Argyll's WebSocket: subscribe to the catalog, the cluster and flows.

     Upgrades the connection; a subscription gets the aggregate's state, then
    its events as they are committed. A browser, whose `WebSocket` cannot
    set `Authorization`, passes its token as `access_token`; a page of an
    origin not in `TARTAN_CORS_ORIGINS` is refused. A `503` when the process
    serves its most streams.

    Args:
        access_token (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            access_token=access_token,
        )
    ).parsed
