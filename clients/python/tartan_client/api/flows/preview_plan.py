from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.execution_plan import ExecutionPlan
from ...models.plan_request import PlanRequest
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    *,
    body: PlanRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/engine/plan",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ExecutionPlan | Problem | None:
    if response.status_code == 200:
        response_200 = ExecutionPlan.from_dict(response.json())

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
) -> Response[ExecutionPlan | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: PlanRequest,
) -> Response[ExecutionPlan | Problem]:
    """Preview the plan for goals and inputs; nothing is started.

     Answers the plan a start with these `goals` and `init` would run: the
    goals, the inputs the caller must give (`required`), the steps as
    stored, who provides and consumes each attribute, the steps left out and
    why, and each sub-flow's plan. Bounded as a start is. A read: a read
    token may call it.

    Args:
        body (PlanRequest): `POST /engine/plan`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ExecutionPlan | Problem]
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
    body: PlanRequest,
) -> ExecutionPlan | Problem | None:
    """Preview the plan for goals and inputs; nothing is started.

     Answers the plan a start with these `goals` and `init` would run: the
    goals, the inputs the caller must give (`required`), the steps as
    stored, who provides and consumes each attribute, the steps left out and
    why, and each sub-flow's plan. Bounded as a start is. A read: a read
    token may call it.

    Args:
        body (PlanRequest): `POST /engine/plan`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ExecutionPlan | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: PlanRequest,
) -> Response[ExecutionPlan | Problem]:
    """Preview the plan for goals and inputs; nothing is started.

     Answers the plan a start with these `goals` and `init` would run: the
    goals, the inputs the caller must give (`required`), the steps as
    stored, who provides and consumes each attribute, the steps left out and
    why, and each sub-flow's plan. Bounded as a start is. A read: a read
    token may call it.

    Args:
        body (PlanRequest): `POST /engine/plan`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ExecutionPlan | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: PlanRequest,
) -> ExecutionPlan | Problem | None:
    """Preview the plan for goals and inputs; nothing is started.

     Answers the plan a start with these `goals` and `init` would run: the
    goals, the inputs the caller must give (`required`), the steps as
    stored, who provides and consumes each attribute, the steps left out and
    why, and each sub-flow's plan. Bounded as a start is. A read: a read
    token may call it.

    Args:
        body (PlanRequest): `POST /engine/plan`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ExecutionPlan | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
