from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.stream_flow_events_response_200 import StreamFlowEventsResponse200
from ...types import UNSET, Response, Unset


def _get_kwargs(
    id: str,
    *,
    after: int | Unset = UNSET,
    access_token: str | Unset = UNSET,
    last_event_id: int | None | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(last_event_id, Unset):
        headers["Last-Event-ID"] = last_event_id

    params: dict[str, Any] = {}

    params["after"] = after

    params["access_token"] = access_token

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/engine/flow/{id}/stream".format(
            id=quote(str(id), safe=""),
        ),
        "params": params,
    }

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | StreamFlowEventsResponse200 | None:
    if response.status_code == 200:
        response_200 = StreamFlowEventsResponse200.from_dict(response.text)

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
) -> Response[Problem | StreamFlowEventsResponse200]:
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
    after: int | Unset = UNSET,
    access_token: str | Unset = UNSET,
    last_event_id: int | None | Unset = UNSET,
) -> Response[Problem | StreamFlowEventsResponse200]:
    """A flow's events as server-sent events, live, then its final state.

     Sends the flow's events from the first (or after `Last-Event-ID`, else
    `?after=`), then each event as it is committed, each message's `id`
    its sequence; once the flow deactivates, one `event: state` message with
    its state as `GET /engine/flow/{id}` answers it, and the stream ends.
    A `503` with `Retry-After` when the process serves its most streams.

    Args:
        id (str):
        after (int | Unset):
        access_token (str | Unset):
        last_event_id (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | StreamFlowEventsResponse200]
    """

    kwargs = _get_kwargs(
        id=id,
        after=after,
        access_token=access_token,
        last_event_id=last_event_id,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    after: int | Unset = UNSET,
    access_token: str | Unset = UNSET,
    last_event_id: int | None | Unset = UNSET,
) -> Problem | StreamFlowEventsResponse200 | None:
    """A flow's events as server-sent events, live, then its final state.

     Sends the flow's events from the first (or after `Last-Event-ID`, else
    `?after=`), then each event as it is committed, each message's `id`
    its sequence; once the flow deactivates, one `event: state` message with
    its state as `GET /engine/flow/{id}` answers it, and the stream ends.
    A `503` with `Retry-After` when the process serves its most streams.

    Args:
        id (str):
        after (int | Unset):
        access_token (str | Unset):
        last_event_id (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | StreamFlowEventsResponse200
    """

    return sync_detailed(
        id=id,
        client=client,
        after=after,
        access_token=access_token,
        last_event_id=last_event_id,
    ).parsed


async def asyncio_detailed(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    after: int | Unset = UNSET,
    access_token: str | Unset = UNSET,
    last_event_id: int | None | Unset = UNSET,
) -> Response[Problem | StreamFlowEventsResponse200]:
    """A flow's events as server-sent events, live, then its final state.

     Sends the flow's events from the first (or after `Last-Event-ID`, else
    `?after=`), then each event as it is committed, each message's `id`
    its sequence; once the flow deactivates, one `event: state` message with
    its state as `GET /engine/flow/{id}` answers it, and the stream ends.
    A `503` with `Retry-After` when the process serves its most streams.

    Args:
        id (str):
        after (int | Unset):
        access_token (str | Unset):
        last_event_id (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | StreamFlowEventsResponse200]
    """

    kwargs = _get_kwargs(
        id=id,
        after=after,
        access_token=access_token,
        last_event_id=last_event_id,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    id: str,
    *,
    client: AuthenticatedClient | Client,
    after: int | Unset = UNSET,
    access_token: str | Unset = UNSET,
    last_event_id: int | None | Unset = UNSET,
) -> Problem | StreamFlowEventsResponse200 | None:
    """A flow's events as server-sent events, live, then its final state.

     Sends the flow's events from the first (or after `Last-Event-ID`, else
    `?after=`), then each event as it is committed, each message's `id`
    its sequence; once the flow deactivates, one `event: state` message with
    its state as `GET /engine/flow/{id}` answers it, and the stream ends.
    A `503` with `Retry-After` when the process serves its most streams.

    Args:
        id (str):
        after (int | Unset):
        access_token (str | Unset):
        last_event_id (int | None | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | StreamFlowEventsResponse200
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            after=after,
            access_token=access_token,
            last_event_id=last_event_id,
        )
    ).parsed
