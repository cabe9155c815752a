from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.bulk_dry_run import BulkDryRun
from ...models.bulk_job_view import BulkJobView
from ...models.bulk_retry_request import BulkRetryRequest
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    *,
    body: BulkRetryRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/engine/bulk/retry",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> BulkDryRun | BulkJobView | Problem | None:
    if response.status_code == 200:
        response_200 = BulkDryRun.from_dict(response.json())

        return response_200

    if response.status_code == 202:
        response_202 = BulkJobView.from_dict(response.json())

        return response_202

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
) -> Response[BulkDryRun | BulkJobView | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: BulkRetryRequest,
) -> Response[BulkDryRun | BulkJobView | Problem]:
    """Retry every failed or cancelled flow a filter matches, as a job.

     Answers `202` with the job, `queued`; the server retries the flows that
    match now, fixed when the job is created, at `rate` flows a second
    (1 to 1000, default 50). The filter must name at least one criterion;
    more flows than `TARTAN_MAX_BULK_FLOWS` is a `400`. `dry_run: true`
    answers `200` with how many flows match and creates nothing. At most
    512 KiB of body.

    Args:
        body (BulkRetryRequest): `POST /engine/bulk/retry`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BulkDryRun | BulkJobView | Problem]
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
    body: BulkRetryRequest,
) -> BulkDryRun | BulkJobView | Problem | None:
    """Retry every failed or cancelled flow a filter matches, as a job.

     Answers `202` with the job, `queued`; the server retries the flows that
    match now, fixed when the job is created, at `rate` flows a second
    (1 to 1000, default 50). The filter must name at least one criterion;
    more flows than `TARTAN_MAX_BULK_FLOWS` is a `400`. `dry_run: true`
    answers `200` with how many flows match and creates nothing. At most
    512 KiB of body.

    Args:
        body (BulkRetryRequest): `POST /engine/bulk/retry`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BulkDryRun | BulkJobView | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: BulkRetryRequest,
) -> Response[BulkDryRun | BulkJobView | Problem]:
    """Retry every failed or cancelled flow a filter matches, as a job.

     Answers `202` with the job, `queued`; the server retries the flows that
    match now, fixed when the job is created, at `rate` flows a second
    (1 to 1000, default 50). The filter must name at least one criterion;
    more flows than `TARTAN_MAX_BULK_FLOWS` is a `400`. `dry_run: true`
    answers `200` with how many flows match and creates nothing. At most
    512 KiB of body.

    Args:
        body (BulkRetryRequest): `POST /engine/bulk/retry`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[BulkDryRun | BulkJobView | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: BulkRetryRequest,
) -> BulkDryRun | BulkJobView | Problem | None:
    """Retry every failed or cancelled flow a filter matches, as a job.

     Answers `202` with the job, `queued`; the server retries the flows that
    match now, fixed when the job is created, at `rate` flows a second
    (1 to 1000, default 50). The filter must name at least one criterion;
    more flows than `TARTAN_MAX_BULK_FLOWS` is a `400`. `dry_run: true`
    answers `200` with how many flows match and creates nothing. At most
    512 KiB of body.

    Args:
        body (BulkRetryRequest): `POST /engine/bulk/retry`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        BulkDryRun | BulkJobView | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
