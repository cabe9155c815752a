from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.bulk_dry_run import BulkDryRun
from ...models.bulk_job_view import BulkJobView
from ...models.bulk_resume_request import BulkResumeRequest
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    *,
    body: BulkResumeRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/engine/bulk/resume",
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
    body: BulkResumeRequest,
) -> Response[BulkDryRun | BulkJobView | Problem]:
    """Resume the parked work of every active flow a filter matches, as a job.

     Answers `202` with the job, `queued`; the server resumes the flows that
    match now at `rate` flows a second (1 to 1000, default 50), skipping
    those with nothing parked. `reset_attempts` (default `false`) gives the
    resumed items a fresh retry budget. `dry_run: true` answers `200` with
    how many flows match and creates nothing. At most 512 KiB of body.

    Args:
        body (BulkResumeRequest): `POST /engine/bulk/resume`: resume the parked work of the active
            flows
            a filter matches (docs/retries.md, "Parking").

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
    body: BulkResumeRequest,
) -> BulkDryRun | BulkJobView | Problem | None:
    """Resume the parked work of every active flow a filter matches, as a job.

     Answers `202` with the job, `queued`; the server resumes the flows that
    match now at `rate` flows a second (1 to 1000, default 50), skipping
    those with nothing parked. `reset_attempts` (default `false`) gives the
    resumed items a fresh retry budget. `dry_run: true` answers `200` with
    how many flows match and creates nothing. At most 512 KiB of body.

    Args:
        body (BulkResumeRequest): `POST /engine/bulk/resume`: resume the parked work of the active
            flows
            a filter matches (docs/retries.md, "Parking").

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
    body: BulkResumeRequest,
) -> Response[BulkDryRun | BulkJobView | Problem]:
    """Resume the parked work of every active flow a filter matches, as a job.

     Answers `202` with the job, `queued`; the server resumes the flows that
    match now at `rate` flows a second (1 to 1000, default 50), skipping
    those with nothing parked. `reset_attempts` (default `false`) gives the
    resumed items a fresh retry budget. `dry_run: true` answers `200` with
    how many flows match and creates nothing. At most 512 KiB of body.

    Args:
        body (BulkResumeRequest): `POST /engine/bulk/resume`: resume the parked work of the active
            flows
            a filter matches (docs/retries.md, "Parking").

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
    body: BulkResumeRequest,
) -> BulkDryRun | BulkJobView | Problem | None:
    """Resume the parked work of every active flow a filter matches, as a job.

     Answers `202` with the job, `queued`; the server resumes the flows that
    match now at `rate` flows a second (1 to 1000, default 50), skipping
    those with nothing parked. `reset_attempts` (default `false`) gives the
    resumed items a fresh retry budget. `dry_run: true` answers `200` with
    how many flows match and creates nothing. At most 512 KiB of body.

    Args:
        body (BulkResumeRequest): `POST /engine/bulk/resume`: resume the parked work of the active
            flows
            a filter matches (docs/retries.md, "Parking").

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
