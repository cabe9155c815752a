from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.flow_turn_answer import FlowTurnAnswer
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    id: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/engine/flow/{id}/turn".format(
            id=quote(str(id), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> FlowTurnAnswer | Problem | None:
    if response.status_code == 200:
        response_200 = FlowTurnAnswer.from_dict(response.json())

        return response_200

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
) -> Response[FlowTurnAnswer | Problem]:
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
) -> Response[FlowTurnAnswer | Problem]:
    """The flow's place in its concurrency key's line.

     For a flow started with `concurrency: {"key", "limit"}`: whether it
    waits for its turn or runs, its place among the key's waiting flows
    (1: the next to run) and how many of the key's flows run and wait
    (docs/concurrency.md). `404` for a flow without a key, or one that
    ended (it left its line).

    Args:
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FlowTurnAnswer | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: str,
    *,
    client: AuthenticatedClient | Client,
) -> FlowTurnAnswer | Problem | None:
    """The flow's place in its concurrency key's line.

     For a flow started with `concurrency: {"key", "limit"}`: whether it
    waits for its turn or runs, its place among the key's waiting flows
    (1: the next to run) and how many of the key's flows run and wait
    (docs/concurrency.md). `404` for a flow without a key, or one that
    ended (it left its line).

    Args:
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FlowTurnAnswer | Problem
    """

    return sync_detailed(
        id=id,
        client=client,
    ).parsed


async def asyncio_detailed(
    id: str,
    *,
    client: AuthenticatedClient | Client,
) -> Response[FlowTurnAnswer | Problem]:
    """The flow's place in its concurrency key's line.

     For a flow started with `concurrency: {"key", "limit"}`: whether it
    waits for its turn or runs, its place among the key's waiting flows
    (1: the next to run) and how many of the key's flows run and wait
    (docs/concurrency.md). `404` for a flow without a key, or one that
    ended (it left its line).

    Args:
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FlowTurnAnswer | Problem]
    """

    kwargs = _get_kwargs(
        id=id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: str,
    *,
    client: AuthenticatedClient | Client,
) -> FlowTurnAnswer | Problem | None:
    """The flow's place in its concurrency key's line.

     For a flow started with `concurrency: {"key", "limit"}`: whether it
    waits for its turn or runs, its place among the key's waiting flows
    (1: the next to run) and how many of the key's flows run and wait
    (docs/concurrency.md). `404` for a flow without a key, or one that
    ended (it left its line).

    Args:
        id (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FlowTurnAnswer | Problem
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
        )
    ).parsed
