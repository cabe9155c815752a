from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    flow: str,
    step: str,
    token: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/webhook/{flow}/{step}/{token}".format(
            flow=quote(str(flow), safe=""),
            step=quote(str(step), safe=""),
            token=quote(str(token), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | None:
    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

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
) -> Response[Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    flow: str,
    step: str,
    token: str,
    *,
    client: AuthenticatedClient,
) -> Response[Problem]:
    """Argyll's unsigned webhook URL: always refused.

     A URL put together from flow state rather than the one the engine handed
    out; it is answered `403`, so that nobody who can read a flow can post
    its results. Post to the exact `Argyll-Webhook-URL` instead.

    Args:
        flow (str):
        step (str):
        token (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem]
    """

    kwargs = _get_kwargs(
        flow=flow,
        step=step,
        token=token,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    flow: str,
    step: str,
    token: str,
    *,
    client: AuthenticatedClient,
) -> Problem | None:
    """Argyll's unsigned webhook URL: always refused.

     A URL put together from flow state rather than the one the engine handed
    out; it is answered `403`, so that nobody who can read a flow can post
    its results. Post to the exact `Argyll-Webhook-URL` instead.

    Args:
        flow (str):
        step (str):
        token (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem
    """

    return sync_detailed(
        flow=flow,
        step=step,
        token=token,
        client=client,
    ).parsed


async def asyncio_detailed(
    flow: str,
    step: str,
    token: str,
    *,
    client: AuthenticatedClient,
) -> Response[Problem]:
    """Argyll's unsigned webhook URL: always refused.

     A URL put together from flow state rather than the one the engine handed
    out; it is answered `403`, so that nobody who can read a flow can post
    its results. Post to the exact `Argyll-Webhook-URL` instead.

    Args:
        flow (str):
        step (str):
        token (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem]
    """

    kwargs = _get_kwargs(
        flow=flow,
        step=step,
        token=token,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    flow: str,
    step: str,
    token: str,
    *,
    client: AuthenticatedClient,
) -> Problem | None:
    """Argyll's unsigned webhook URL: always refused.

     A URL put together from flow state rather than the one the engine handed
    out; it is answered `403`, so that nobody who can read a flow can post
    its results. Post to the exact `Argyll-Webhook-URL` instead.

    Args:
        flow (str):
        step (str):
        token (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem
    """

    return (
        await asyncio_detailed(
            flow=flow,
            step=step,
            token=token,
            client=client,
        )
    ).parsed
