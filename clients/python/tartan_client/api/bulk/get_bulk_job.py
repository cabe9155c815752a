from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.bulk_job_view import BulkJobView
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    job: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/engine/bulk/{job}".format(
            job=quote(str(job), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> BulkJobView | Problem | None:
    if response.status_code == 200:
        response_200 = BulkJobView.from_dict(response.json())

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
) -> Response[BulkJobView | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    job: str,
    *,
    client: AuthenticatedClient | Client,
) -> Response[BulkJobView | Problem]:
    """A bulk job's progress, with up to 20 of the flows it failed on.

     `status` is `queued`, `running`, `completed`, `cancelled` or `failed`;
    `failures` lists, in order, up to 20 flows whose retry or cancel was
    refused or failed, each with why.

    Args:
        job (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BulkJobView | Problem]
    """

    kwargs = _get_kwargs(
        job=job,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    job: str,
    *,
    client: AuthenticatedClient | Client,
) -> BulkJobView | Problem | None:
    """A bulk job's progress, with up to 20 of the flows it failed on.

     `status` is `queued`, `running`, `completed`, `cancelled` or `failed`;
    `failures` lists, in order, up to 20 flows whose retry or cancel was
    refused or failed, each with why.

    Args:
        job (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BulkJobView | Problem
    """

    return sync_detailed(
        job=job,
        client=client,
    ).parsed


async def asyncio_detailed(
    job: str,
    *,
    client: AuthenticatedClient | Client,
) -> Response[BulkJobView | Problem]:
    """A bulk job's progress, with up to 20 of the flows it failed on.

     `status` is `queued`, `running`, `completed`, `cancelled` or `failed`;
    `failures` lists, in order, up to 20 flows whose retry or cancel was
    refused or failed, each with why.

    Args:
        job (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BulkJobView | Problem]
    """

    kwargs = _get_kwargs(
        job=job,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    job: str,
    *,
    client: AuthenticatedClient | Client,
) -> BulkJobView | Problem | None:
    """A bulk job's progress, with up to 20 of the flows it failed on.

     `status` is `queued`, `running`, `completed`, `cancelled` or `failed`;
    `failures` lists, in order, up to 20 flows whose retry or cancel was
    refused or failed, each with why.

    Args:
        job (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BulkJobView | Problem
    """

    return (
        await asyncio_detailed(
            job=job,
            client=client,
        )
    ).parsed
