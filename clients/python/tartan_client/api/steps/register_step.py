from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.step import Step
from ...models.step_saved import StepSaved
from ...types import Response


def _get_kwargs(
    *,
    body: Step,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/engine/step",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | StepSaved | None:
    if response.status_code == 201:
        response_201 = StepSaved.from_dict(response.json())

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
) -> Response[Problem | StepSaved]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: Step,
) -> Response[Problem | StepSaved]:
    """Register a step; an identical repeat is a 201 too.

     `id`, `name` and `type` are required (`sync`, `async`, `script` or
    `flow`), with `http.endpoint` for `sync` and `async` steps. Every
    problem is a `400` naming its field; an id that already holds a
    different definition is a `409` (replace it with `PUT`). The answer is
    the step as stored: the id sanitised, the defaults filled in, and
    `effective_retry` and `effective_timeouts`. At most 512 KiB of body.

    Args:
        body (Step): A registered step: an HTTP endpoint with declared inputs and outputs.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | StepSaved]
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
    body: Step,
) -> Problem | StepSaved | None:
    """Register a step; an identical repeat is a 201 too.

     `id`, `name` and `type` are required (`sync`, `async`, `script` or
    `flow`), with `http.endpoint` for `sync` and `async` steps. Every
    problem is a `400` naming its field; an id that already holds a
    different definition is a `409` (replace it with `PUT`). The answer is
    the step as stored: the id sanitised, the defaults filled in, and
    `effective_retry` and `effective_timeouts`. At most 512 KiB of body.

    Args:
        body (Step): A registered step: an HTTP endpoint with declared inputs and outputs.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | StepSaved
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: Step,
) -> Response[Problem | StepSaved]:
    """Register a step; an identical repeat is a 201 too.

     `id`, `name` and `type` are required (`sync`, `async`, `script` or
    `flow`), with `http.endpoint` for `sync` and `async` steps. Every
    problem is a `400` naming its field; an id that already holds a
    different definition is a `409` (replace it with `PUT`). The answer is
    the step as stored: the id sanitised, the defaults filled in, and
    `effective_retry` and `effective_timeouts`. At most 512 KiB of body.

    Args:
        body (Step): A registered step: an HTTP endpoint with declared inputs and outputs.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | StepSaved]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: Step,
) -> Problem | StepSaved | None:
    """Register a step; an identical repeat is a 201 too.

     `id`, `name` and `type` are required (`sync`, `async`, `script` or
    `flow`), with `http.endpoint` for `sync` and `async` steps. Every
    problem is a `400` naming its field; an id that already holds a
    different definition is a `409` (replace it with `PUT`). The answer is
    the step as stored: the id sanitised, the defaults filled in, and
    `effective_retry` and `effective_timeouts`. At most 512 KiB of body.

    Args:
        body (Step): A registered step: an HTTP endpoint with declared inputs and outputs.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | StepSaved
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
