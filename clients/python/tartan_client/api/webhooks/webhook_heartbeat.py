from http import HTTPStatus
from typing import Any, cast
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    flow: str,
    step: str,
    token: str,
    signature: str,
) -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/webhook/{flow}/{step}/{token}/{signature}/heartbeat".format(
            flow=quote(str(flow), safe=""),
            step=quote(str(step), safe=""),
            token=quote(str(token), safe=""),
            signature=quote(str(signature), safe=""),
        ),
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Any | Problem | None:
    if response.status_code == 200:
        response_200 = cast(Any, None)
        return response_200

    if response.status_code == 400:
        response_400 = Problem.from_dict(response.json())

        return response_400

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

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
) -> Response[Any | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    flow: str,
    step: str,
    token: str,
    signature: str,
    *,
    client: AuthenticatedClient,
) -> Response[Any | Problem]:
    """An async step is still working: its inactivity window starts again.

     Posted by an async step that accepted its call, to its webhook URL and
    `/heartbeat`; answers `200` with an empty body (for a step without an
    inactivity timeout nothing changes). The body is ignored, but the
    `Content-Type` must be JSON, as on every `POST`. No bearer token: the
    URL's signature is the credential.

    Args:
        flow (str):
        step (str):
        token (str):
        signature (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
    """

    kwargs = _get_kwargs(
        flow=flow,
        step=step,
        token=token,
        signature=signature,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    flow: str,
    step: str,
    token: str,
    signature: str,
    *,
    client: AuthenticatedClient,
) -> Any | Problem | None:
    """An async step is still working: its inactivity window starts again.

     Posted by an async step that accepted its call, to its webhook URL and
    `/heartbeat`; answers `200` with an empty body (for a step without an
    inactivity timeout nothing changes). The body is ignored, but the
    `Content-Type` must be JSON, as on every `POST`. No bearer token: the
    URL's signature is the credential.

    Args:
        flow (str):
        step (str):
        token (str):
        signature (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
    """

    return sync_detailed(
        flow=flow,
        step=step,
        token=token,
        signature=signature,
        client=client,
    ).parsed


async def asyncio_detailed(
    flow: str,
    step: str,
    token: str,
    signature: str,
    *,
    client: AuthenticatedClient,
) -> Response[Any | Problem]:
    """An async step is still working: its inactivity window starts again.

     Posted by an async step that accepted its call, to its webhook URL and
    `/heartbeat`; answers `200` with an empty body (for a step without an
    inactivity timeout nothing changes). The body is ignored, but the
    `Content-Type` must be JSON, as on every `POST`. No bearer token: the
    URL's signature is the credential.

    Args:
        flow (str):
        step (str):
        token (str):
        signature (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Any | Problem]
    """

    kwargs = _get_kwargs(
        flow=flow,
        step=step,
        token=token,
        signature=signature,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    flow: str,
    step: str,
    token: str,
    signature: str,
    *,
    client: AuthenticatedClient,
) -> Any | Problem | None:
    """An async step is still working: its inactivity window starts again.

     Posted by an async step that accepted its call, to its webhook URL and
    `/heartbeat`; answers `200` with an empty body (for a step without an
    inactivity timeout nothing changes). The body is ignored, but the
    `Content-Type` must be JSON, as on every `POST`. No bearer token: the
    URL's signature is the credential.

    Args:
        flow (str):
        step (str):
        token (str):
        signature (str):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Any | Problem
    """

    return (
        await asyncio_detailed(
            flow=flow,
            step=step,
            token=token,
            signature=signature,
            client=client,
        )
    ).parsed
