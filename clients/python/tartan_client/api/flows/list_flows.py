from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.flow_summary import FlowSummary
from ...models.problem import Problem
from ...types import Response


def _get_kwargs() -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/engine/flow",
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | list[FlowSummary] | None:
    if response.status_code == 200:
        response_200 = []
        _response_200 = response.json()
        for response_200_item_data in _response_200:
            response_200_item = FlowSummary.from_dict(response_200_item_data)

            response_200.append(response_200_item)

        return response_200

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Problem | list[FlowSummary]]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
) -> Response[Problem | list[FlowSummary]]:
    """The flows, running ones first, as a bare array.

     As Argyll lists them: the running flows, most recently started first,
    then the ended ones, most recently ended first; each `{"id", "status",
    "timestamp"}` (its end, or its start while it runs). Up to 1000 flows;
    sub-flows of flow steps are not listed. To filter, page, count or see
    more of each flow, use `POST /engine/flow/query`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | list[FlowSummary]]
    """

    kwargs = _get_kwargs()

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
) -> Problem | list[FlowSummary] | None:
    """The flows, running ones first, as a bare array.

     As Argyll lists them: the running flows, most recently started first,
    then the ended ones, most recently ended first; each `{"id", "status",
    "timestamp"}` (its end, or its start while it runs). Up to 1000 flows;
    sub-flows of flow steps are not listed. To filter, page, count or see
    more of each flow, use `POST /engine/flow/query`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | list[FlowSummary]
    """

    return sync_detailed(
        client=client,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
) -> Response[Problem | list[FlowSummary]]:
    """The flows, running ones first, as a bare array.

     As Argyll lists them: the running flows, most recently started first,
    then the ended ones, most recently ended first; each `{"id", "status",
    "timestamp"}` (its end, or its start while it runs). Up to 1000 flows;
    sub-flows of flow steps are not listed. To filter, page, count or see
    more of each flow, use `POST /engine/flow/query`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | list[FlowSummary]]
    """

    kwargs = _get_kwargs()

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
) -> Problem | list[FlowSummary] | None:
    """The flows, running ones first, as a bare array.

     As Argyll lists them: the running flows, most recently started first,
    then the ended ones, most recently ended first; each `{"id", "status",
    "timestamp"}` (its end, or its start while it runs). Up to 1000 flows;
    sub-flows of flow steps are not listed. To filter, page, count or see
    more of each flow, use `POST /engine/flow/query`.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | list[FlowSummary]
    """

    return (
        await asyncio_detailed(
            client=client,
        )
    ).parsed
