from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.schedule_request import ScheduleRequest
from ...models.schedule_shown import ScheduleShown
from ...types import Response


def _get_kwargs(
    *,
    body: ScheduleRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/engine/schedule",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | ScheduleShown | None:
    if response.status_code == 201:
        response_201 = ScheduleShown.from_dict(response.json())

        return response_201

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

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
) -> Response[Problem | ScheduleShown]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: ScheduleRequest,
) -> Response[Problem | ScheduleShown]:
    """Create a schedule.

     One of `cron` (five fields, six with seconds, or `@hourly`-style names),
    `every` (at least 1 s) or `at` (RFC 3339), read in `timezone` (IANA,
    default UTC); `flow` is what each fire starts (its goals must be
    plannable now). Each fire starts at most one flow whatever the number
    of engines, with the id `<schedule>-<fire time>` and the labels
    `schedule` and `scheduled_at`. A bad field is a `400` naming it; a taken
    id a `409`.

    Args:
        body (ScheduleRequest): A schedule: when it fires (one of `cron`, `every`, `at`), what it
            starts, and what it does about overlaps and missed times.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ScheduleShown]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    body: ScheduleRequest,
) -> Problem | ScheduleShown | None:
    """Create a schedule.

     One of `cron` (five fields, six with seconds, or `@hourly`-style names),
    `every` (at least 1 s) or `at` (RFC 3339), read in `timezone` (IANA,
    default UTC); `flow` is what each fire starts (its goals must be
    plannable now). Each fire starts at most one flow whatever the number
    of engines, with the id `<schedule>-<fire time>` and the labels
    `schedule` and `scheduled_at`. A bad field is a `400` naming it; a taken
    id a `409`.

    Args:
        body (ScheduleRequest): A schedule: when it fires (one of `cron`, `every`, `at`), what it
            starts, and what it does about overlaps and missed times.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | ScheduleShown
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: ScheduleRequest,
) -> Response[Problem | ScheduleShown]:
    """Create a schedule.

     One of `cron` (five fields, six with seconds, or `@hourly`-style names),
    `every` (at least 1 s) or `at` (RFC 3339), read in `timezone` (IANA,
    default UTC); `flow` is what each fire starts (its goals must be
    plannable now). Each fire starts at most one flow whatever the number
    of engines, with the id `<schedule>-<fire time>` and the labels
    `schedule` and `scheduled_at`. A bad field is a `400` naming it; a taken
    id a `409`.

    Args:
        body (ScheduleRequest): A schedule: when it fires (one of `cron`, `every`, `at`), what it
            starts, and what it does about overlaps and missed times.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | ScheduleShown]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: ScheduleRequest,
) -> Problem | ScheduleShown | None:
    """Create a schedule.

     One of `cron` (five fields, six with seconds, or `@hourly`-style names),
    `every` (at least 1 s) or `at` (RFC 3339), read in `timezone` (IANA,
    default UTC); `flow` is what each fire starts (its goals must be
    plannable now). Each fire starts at most one flow whatever the number
    of engines, with the id `<schedule>-<fire time>` and the labels
    `schedule` and `scheduled_at`. A bad field is a `400` naming it; a taken
    id a `409`.

    Args:
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
            client=client,
            body=body,
        )
    ).parsed
