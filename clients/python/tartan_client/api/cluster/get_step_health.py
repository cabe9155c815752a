from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.step_health import StepHealth
from ...types import Response


def _get_kwargs(
    step: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/engine/health/{step}".format(
            step=quote(str(step), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | StepHealth | None:
    if response.status_code == 200:
        response_200 = StepHealth.from_dict(response.json())

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
) -> Response[Problem | StepHealth]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    step: str,
    *,
    client: AuthenticatedClient | Client,
) -> Response[Problem | StepHealth]:
    """One step's health, as the cluster knows it.

     `unknown`, `healthy` or `unhealthy` (with the check's `error`), from
    the last call of the step's `http.health_check` by any engine, with who
    checked it and when. A step not in the catalog is a `404`.

    Args:
        step (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | StepHealth]
    """

    kwargs = _get_kwargs(
        step=step,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    step: str,
    *,
    client: AuthenticatedClient | Client,
) -> Problem | StepHealth | None:
    """One step's health, as the cluster knows it.

     `unknown`, `healthy` or `unhealthy` (with the check's `error`), from
    the last call of the step's `http.health_check` by any engine, with who
    checked it and when. A step not in the catalog is a `404`.

    Args:
        step (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | StepHealth
    """

    return sync_detailed(
        step=step,
        client=client,
    ).parsed


async def asyncio_detailed(
    step: str,
    *,
    client: AuthenticatedClient | Client,
) -> Response[Problem | StepHealth]:
    """One step's health, as the cluster knows it.

     `unknown`, `healthy` or `unhealthy` (with the check's `error`), from
    the last call of the step's `http.health_check` by any engine, with who
    checked it and when. A step not in the catalog is a `404`.

    Args:
        step (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | StepHealth]
    """

    kwargs = _get_kwargs(
        step=step,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    step: str,
    *,
    client: AuthenticatedClient | Client,
) -> Problem | StepHealth | None:
    """One step's health, as the cluster knows it.

     `unknown`, `healthy` or `unhealthy` (with the check's `error`), from
    the last call of the step's `http.health_check` by any engine, with who
    checked it and when. A step not in the catalog is a `404`.

    Args:
        step (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | StepHealth
    """

    return (
        await asyncio_detailed(
            step=step,
            client=client,
        )
    ).parsed
