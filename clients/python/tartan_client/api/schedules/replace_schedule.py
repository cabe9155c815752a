from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.schedule_request import ScheduleRequest
from ...models.schedule_shown import ScheduleShown
from ...types import Response


def _get_kwargs(
    id: str,
    *,
    body: ScheduleRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/engine/schedule/{id}".format(
            id=quote(str(id), safe=""),
        ),
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | ScheduleShown | None:
    if response.status_code == 200:
        response_200 = ScheduleShown.from_dict(response.json())

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

    if response.status_code == 408:
        response_408 = Problem.from_dict(response.json())

        return response_408

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
) -> Response[Problem | ScheduleShown]:
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
    body: ScheduleRequest,
) -> Response[Problem | ScheduleShown]:
    """Replace a schedule.

     Its history and its flows stay; `every` still counts from its creation.
    A kept `buffer_one` fire is dropped.

    Args:
        id (str):
        body (ScheduleRequest): A schedule: when it fires (one of `cron`, `every`, `at`), what it
            starts, and what it does about overlaps and missed times.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ScheduleShown]
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
    body: ScheduleRequest,
) -> Problem | ScheduleShown | None:
    """Replace a schedule.

     Its history and its flows stay; `every` still counts from its creation.
    A kept `buffer_one` fire is dropped.

    Args:
        id (str):
        body (ScheduleRequest): A schedule: when it fires (one of `cron`, `every`, `at`), what it
            starts, and what it does about overlaps and missed times.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ScheduleShown
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
    body: ScheduleRequest,
) -> Response[Problem | ScheduleShown]:
    """Replace a schedule.

     Its history and its flows stay; `every` still counts from its creation.
    A kept `buffer_one` fire is dropped.

    Args:
        id (str):
        body (ScheduleRequest): A schedule: when it fires (one of `cron`, `every`, `at`), what it
            starts, and what it does about overlaps and missed times.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ScheduleShown]
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
    body: ScheduleRequest,
) -> Problem | ScheduleShown | None:
    """Replace a schedule.

     Its history and its flows stay; `every` still counts from its creation.
    A kept `buffer_one` fire is dropped.

    Args:
        id (str):
        body (ScheduleRequest): A schedule: when it fires (one of `cron`, `every`, `at`), what it
            starts, and what it does about overlaps and missed times.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ScheduleShown
    """

    return (
        await asyncio_detailed(
            id=id,
            client=client,
            body=body,
        )
    ).parsed
