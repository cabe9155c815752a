from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.feed_message import FeedMessage
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    after: int | Unset = UNSET,
    flow_prefix: str | Unset = UNSET,
    type_: str | Unset = UNSET,
    access_token: str | Unset = UNSET,
    last_event_id: int | None | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(last_event_id, Unset):
        headers["Last-Event-ID"] = last_event_id

    params: dict[str, Any] = {}

    params["after"] = after

    params["flow_prefix"] = flow_prefix

    params["type"] = type_

    params["access_token"] = access_token

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/engine/events/stream",
        "params": params,
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> FeedMessage | Problem | None:
    if response.status_code == 200:
        response_200 = FeedMessage.from_dict(response.text)

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

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[FeedMessage | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    after: int | Unset = UNSET,
    flow_prefix: str | Unset = UNSET,
    type_: str | Unset = UNSET,
    access_token: str | Unset = UNSET,
    last_event_id: int | None | Unset = UNSET,
) -> Response[FeedMessage | Problem]:
    """Every flow's events as server-sent events, live; it does not end.

     Events of every flow in the order they were committed, by any engine on
    the database, each message's `id` its global position. Starts after
    `Last-Event-ID`, else after `?after=POSITION`, else at the present.
    `flow_prefix` and `type` (comma-separated event types) filter it. A
    `503` with `Retry-After` when the process serves its most streams.

    Args:
        after (int | Unset):
        flow_prefix (str | Unset):
        type_ (str | Unset):
        access_token (str | Unset):
        last_event_id (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FeedMessage | Problem]
    """

    kwargs = _get_kwargs(
        after=after,
        flow_prefix=flow_prefix,
        type_=type_,
        access_token=access_token,
        last_event_id=last_event_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    after: int | Unset = UNSET,
    flow_prefix: str | Unset = UNSET,
    type_: str | Unset = UNSET,
    access_token: str | Unset = UNSET,
    last_event_id: int | None | Unset = UNSET,
) -> FeedMessage | Problem | None:
    """Every flow's events as server-sent events, live; it does not end.

     Events of every flow in the order they were committed, by any engine on
    the database, each message's `id` its global position. Starts after
    `Last-Event-ID`, else after `?after=POSITION`, else at the present.
    `flow_prefix` and `type` (comma-separated event types) filter it. A
    `503` with `Retry-After` when the process serves its most streams.

    Args:
        after (int | Unset):
        flow_prefix (str | Unset):
        type_ (str | Unset):
        access_token (str | Unset):
        last_event_id (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FeedMessage | Problem
    """

    return sync_detailed(
        client=client,
        after=after,
        flow_prefix=flow_prefix,
        type_=type_,
        access_token=access_token,
        last_event_id=last_event_id,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    after: int | Unset = UNSET,
    flow_prefix: str | Unset = UNSET,
    type_: str | Unset = UNSET,
    access_token: str | Unset = UNSET,
    last_event_id: int | None | Unset = UNSET,
) -> Response[FeedMessage | Problem]:
    """Every flow's events as server-sent events, live; it does not end.

     Events of every flow in the order they were committed, by any engine on
    the database, each message's `id` its global position. Starts after
    `Last-Event-ID`, else after `?after=POSITION`, else at the present.
    `flow_prefix` and `type` (comma-separated event types) filter it. A
    `503` with `Retry-After` when the process serves its most streams.

    Args:
        after (int | Unset):
        flow_prefix (str | Unset):
        type_ (str | Unset):
        access_token (str | Unset):
        last_event_id (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FeedMessage | Problem]
    """

    kwargs = _get_kwargs(
        after=after,
        flow_prefix=flow_prefix,
        type_=type_,
        access_token=access_token,
        last_event_id=last_event_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    after: int | Unset = UNSET,
    flow_prefix: str | Unset = UNSET,
    type_: str | Unset = UNSET,
    access_token: str | Unset = UNSET,
    last_event_id: int | None | Unset = UNSET,
) -> FeedMessage | Problem | None:
    """Every flow's events as server-sent events, live; it does not end.

     Events of every flow in the order they were committed, by any engine on
    the database, each message's `id` its global position. Starts after
    `Last-Event-ID`, else after `?after=POSITION`, else at the present.
    `flow_prefix` and `type` (comma-separated event types) filter it. A
    `503` with `Retry-After` when the process serves its most streams.

    Args:
        after (int | Unset):
        flow_prefix (str | Unset):
        type_ (str | Unset):
        access_token (str | Unset):
        last_event_id (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FeedMessage | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            after=after,
            flow_prefix=flow_prefix,
            type_=type_,
            access_token=access_token,
            last_event_id=last_event_id,
        )
    ).parsed
