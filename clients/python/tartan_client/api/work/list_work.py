from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...models.work_list import WorkList
from ...models.work_status import WorkStatus
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    status: WorkStatus | Unset = UNSET,
    step: str | Unset = UNSET,
    flow_id: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    json_status: str | Unset = UNSET
    if not isinstance(status, Unset):
        json_status = status.value

    params["status"] = json_status

    params["step"] = step

    params["flow_id"] = flow_id

    params["limit"] = limit

    params["cursor"] = cursor

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/engine/work",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | WorkList | None:
    if response.status_code == 200:
        response_200 = WorkList.from_dict(response.json())

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

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Problem | WorkList]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
    status: WorkStatus | Unset = UNSET,
    step: str | Unset = UNSET,
    flow_id: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> Response[Problem | WorkList]:
    """Work items across flows, a page at a time.

     Filtered by `status`, `step` and `flow_id` (an empty parameter is none;
    ids at most 256 bytes); `limit` 1 to 1000 (default 100), and `cursor`,
    the previous page's `next_cursor`, absent on the last page.

    Args:
        status (WorkStatus | Unset):
        step (str | Unset):
        flow_id (str | Unset):
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | WorkList]
    """

    kwargs = _get_kwargs(
        status=status,
        step=step,
        flow_id=flow_id,
        limit=limit,
        cursor=cursor,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
    status: WorkStatus | Unset = UNSET,
    step: str | Unset = UNSET,
    flow_id: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> Problem | WorkList | None:
    """Work items across flows, a page at a time.

     Filtered by `status`, `step` and `flow_id` (an empty parameter is none;
    ids at most 256 bytes); `limit` 1 to 1000 (default 100), and `cursor`,
    the previous page's `next_cursor`, absent on the last page.

    Args:
        status (WorkStatus | Unset):
        step (str | Unset):
        flow_id (str | Unset):
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | WorkList
    """

    return sync_detailed(
        client=client,
        status=status,
        step=step,
        flow_id=flow_id,
        limit=limit,
        cursor=cursor,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
    status: WorkStatus | Unset = UNSET,
    step: str | Unset = UNSET,
    flow_id: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> Response[Problem | WorkList]:
    """Work items across flows, a page at a time.

     Filtered by `status`, `step` and `flow_id` (an empty parameter is none;
    ids at most 256 bytes); `limit` 1 to 1000 (default 100), and `cursor`,
    the previous page's `next_cursor`, absent on the last page.

    Args:
        status (WorkStatus | Unset):
        step (str | Unset):
        flow_id (str | Unset):
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | WorkList]
    """

    kwargs = _get_kwargs(
        status=status,
        step=step,
        flow_id=flow_id,
        limit=limit,
        cursor=cursor,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
    status: WorkStatus | Unset = UNSET,
    step: str | Unset = UNSET,
    flow_id: str | Unset = UNSET,
    limit: int | Unset = UNSET,
    cursor: str | Unset = UNSET,
) -> Problem | WorkList | None:
    """Work items across flows, a page at a time.

     Filtered by `status`, `step` and `flow_id` (an empty parameter is none;
    ids at most 256 bytes); `limit` 1 to 1000 (default 100), and `cursor`,
    the previous page's `next_cursor`, absent on the last page.

    Args:
        status (WorkStatus | Unset):
        step (str | Unset):
        flow_id (str | Unset):
        limit (int | Unset):
        cursor (str | Unset):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | WorkList
    """

    return (
        await asyncio_detailed(
            client=client,
            status=status,
            step=step,
            flow_id=flow_id,
            limit=limit,
            cursor=cursor,
        )
    ).parsed
