from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.flow_answer import FlowAnswer
from ...models.problem import Problem
from ...models.start_flow import StartFlow
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: StartFlow,
    traceparent: None | str | Unset = UNSET,
    tracestate: None | str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    if not isinstance(traceparent, Unset):
        headers["traceparent"] = traceparent

    if not isinstance(tracestate, Unset):
        headers["tracestate"] = tracestate

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/engine/flow",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> FlowAnswer | Problem | None:
    if response.status_code == 201:
        response_201 = FlowAnswer.from_dict(response.json())

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

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

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
) -> Response[FlowAnswer | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: StartFlow,
    traceparent: None | str | Unset = UNSET,
    tracestate: None | str | Unset = UNSET,
) -> Response[FlowAnswer | Problem]:
    """Start a flow towards goal steps.

     Plans the smallest set of steps that provides the goals' required inputs
    from `init` and from each other, records the start durably and answers
    `201`; the steps then run in the background: wait for the end with
    `GET /engine/flow/{id}/status?wait=30s`. `id` (sanitised, at most 256
    bytes) and `goals` (1 to 64 step ids) are required. The same start
    under the same id again is a `201` and changes nothing; a different one
    is a `409`. A goal that is not registered is a `404`, required inputs
    that nothing provides a `400` naming them. At most 1 MiB of body; a
    `503` with `Retry-After` when the engine is at `TARTAN_MAX_ACTIVE_FLOWS`
    or stopping. A `traceparent` header puts the flow in the caller's trace.

    Args:
        traceparent (None | str | Unset):
        tracestate (None | str | Unset):
        body (StartFlow): `POST /engine/flow`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FlowAnswer | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
        traceparent=traceparent,
        tracestate=tracestate,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    body: StartFlow,
    traceparent: None | str | Unset = UNSET,
    tracestate: None | str | Unset = UNSET,
) -> FlowAnswer | Problem | None:
    """Start a flow towards goal steps.

     Plans the smallest set of steps that provides the goals' required inputs
    from `init` and from each other, records the start durably and answers
    `201`; the steps then run in the background: wait for the end with
    `GET /engine/flow/{id}/status?wait=30s`. `id` (sanitised, at most 256
    bytes) and `goals` (1 to 64 step ids) are required. The same start
    under the same id again is a `201` and changes nothing; a different one
    is a `409`. A goal that is not registered is a `404`, required inputs
    that nothing provides a `400` naming them. At most 1 MiB of body; a
    `503` with `Retry-After` when the engine is at `TARTAN_MAX_ACTIVE_FLOWS`
    or stopping. A `traceparent` header puts the flow in the caller's trace.

    Args:
        traceparent (None | str | Unset):
        tracestate (None | str | Unset):
        body (StartFlow): `POST /engine/flow`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FlowAnswer | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
        traceparent=traceparent,
        tracestate=tracestate,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: StartFlow,
    traceparent: None | str | Unset = UNSET,
    tracestate: None | str | Unset = UNSET,
) -> Response[FlowAnswer | Problem]:
    """Start a flow towards goal steps.

     Plans the smallest set of steps that provides the goals' required inputs
    from `init` and from each other, records the start durably and answers
    `201`; the steps then run in the background: wait for the end with
    `GET /engine/flow/{id}/status?wait=30s`. `id` (sanitised, at most 256
    bytes) and `goals` (1 to 64 step ids) are required. The same start
    under the same id again is a `201` and changes nothing; a different one
    is a `409`. A goal that is not registered is a `404`, required inputs
    that nothing provides a `400` naming them. At most 1 MiB of body; a
    `503` with `Retry-After` when the engine is at `TARTAN_MAX_ACTIVE_FLOWS`
    or stopping. A `traceparent` header puts the flow in the caller's trace.

    Args:
        traceparent (None | str | Unset):
        tracestate (None | str | Unset):
        body (StartFlow): `POST /engine/flow`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FlowAnswer | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
        traceparent=traceparent,
        tracestate=tracestate,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: StartFlow,
    traceparent: None | str | Unset = UNSET,
    tracestate: None | str | Unset = UNSET,
) -> FlowAnswer | Problem | None:
    """Start a flow towards goal steps.

     Plans the smallest set of steps that provides the goals' required inputs
    from `init` and from each other, records the start durably and answers
    `201`; the steps then run in the background: wait for the end with
    `GET /engine/flow/{id}/status?wait=30s`. `id` (sanitised, at most 256
    bytes) and `goals` (1 to 64 step ids) are required. The same start
    under the same id again is a `201` and changes nothing; a different one
    is a `409`. A goal that is not registered is a `404`, required inputs
    that nothing provides a `400` naming them. At most 1 MiB of body; a
    `503` with `Retry-After` when the engine is at `TARTAN_MAX_ACTIVE_FLOWS`
    or stopping. A `traceparent` header puts the flow in the caller's trace.

    Args:
        traceparent (None | str | Unset):
        tracestate (None | str | Unset):
        body (StartFlow): `POST /engine/flow`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FlowAnswer | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
            traceparent=traceparent,
            tracestate=tracestate,
        )
    ).parsed
