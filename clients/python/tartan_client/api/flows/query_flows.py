from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.flow_page import FlowPage
from ...models.problem import Problem
from ...models.query_request import QueryRequest
from ...types import Response


def _get_kwargs(
    *,
    body: QueryRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/engine/flow/query",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> FlowPage | Problem | None:
    if response.status_code == 200:
        response_200 = FlowPage.from_dict(response.json())

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
) -> Response[FlowPage | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: QueryRequest,
) -> Response[FlowPage | Problem]:
    """Filter flows, a page at a time.

     Every criterion is optional and an empty string is none: `id_prefix`,
    `labels` (all must match), `statuses`, `failed_step`, `error_class`,
    `created_after`/`created_before`, and sub-flows only with `children`.
    `limit` 1 to 1000 (0 or absent: 100), `sort` `recent_asc` (the
    default) or `recent_desc`, and `cursor`, the previous page's
    `next_cursor`. Running flows come first, by start, then ended ones, by
    end, as Argyll lists them; `total` counts every match (unless the
    query says `"total": false`). It
    matches exactly the flows a bulk job with the same filter would. A read:
    a read token may call it.

    Args:
        body (QueryRequest): `POST /engine/flow/query`: every criterion is optional.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FlowPage | Problem]
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
    body: QueryRequest,
) -> FlowPage | Problem | None:
    """Filter flows, a page at a time.

     Every criterion is optional and an empty string is none: `id_prefix`,
    `labels` (all must match), `statuses`, `failed_step`, `error_class`,
    `created_after`/`created_before`, and sub-flows only with `children`.
    `limit` 1 to 1000 (0 or absent: 100), `sort` `recent_asc` (the
    default) or `recent_desc`, and `cursor`, the previous page's
    `next_cursor`. Running flows come first, by start, then ended ones, by
    end, as Argyll lists them; `total` counts every match (unless the
    query says `"total": false`). It
    matches exactly the flows a bulk job with the same filter would. A read:
    a read token may call it.

    Args:
        body (QueryRequest): `POST /engine/flow/query`: every criterion is optional.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FlowPage | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    body: QueryRequest,
) -> Response[FlowPage | Problem]:
    """Filter flows, a page at a time.

     Every criterion is optional and an empty string is none: `id_prefix`,
    `labels` (all must match), `statuses`, `failed_step`, `error_class`,
    `created_after`/`created_before`, and sub-flows only with `children`.
    `limit` 1 to 1000 (0 or absent: 100), `sort` `recent_asc` (the
    default) or `recent_desc`, and `cursor`, the previous page's
    `next_cursor`. Running flows come first, by start, then ended ones, by
    end, as Argyll lists them; `total` counts every match (unless the
    query says `"total": false`). It
    matches exactly the flows a bulk job with the same filter would. A read:
    a read token may call it.

    Args:
        body (QueryRequest): `POST /engine/flow/query`: every criterion is optional.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[FlowPage | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    body: QueryRequest,
) -> FlowPage | Problem | None:
    """Filter flows, a page at a time.

     Every criterion is optional and an empty string is none: `id_prefix`,
    `labels` (all must match), `statuses`, `failed_step`, `error_class`,
    `created_after`/`created_before`, and sub-flows only with `children`.
    `limit` 1 to 1000 (0 or absent: 100), `sort` `recent_asc` (the
    default) or `recent_desc`, and `cursor`, the previous page's
    `next_cursor`. Running flows come first, by start, then ended ones, by
    end, as Argyll lists them; `total` counts every match (unless the
    query says `"total": false`). It
    matches exactly the flows a bulk job with the same filter would. A read:
    a read token may call it.

    Args:
        body (QueryRequest): `POST /engine/flow/query`: every criterion is optional.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        FlowPage | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
