from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.http_config_classify import HttpConfigClassify


T = TypeVar("T", bound="HttpConfig")


@_attrs_define
class HttpConfig:
    """How a step is called over HTTP.

    Attributes:
        endpoint (str): An `http://` or `https://` URL; `{name}` placeholders name required
            inputs. Required.
        classify (HttpConfigClassify | Unset): Statuses, ranges (`500-504`) or classes (`5xx`) mapped to
            `retryable`, `permanent` or `rate_limited`, over the retry policy's
            `retry_on` (docs/retries.md, "A step's own classes").
        compensate (str | Unset):
        health_check (str | Unset):
        method (str | Unset): `GET`, `POST`, `PUT` or `DELETE`; `POST` when absent.
        timeout (int | str | Unset): The attempt timeout; 0 or absent: the engine default (as Argyll). Milliseconds, or
            a duration such as `5s` (docs/durations.md); shown as milliseconds.
    """

    endpoint: str
    classify: HttpConfigClassify | Unset = UNSET
    compensate: str | Unset = UNSET
    health_check: str | Unset = UNSET
    method: str | Unset = UNSET
    timeout: int | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        endpoint = self.endpoint

        classify: dict[str, Any] | Unset = UNSET
        if not isinstance(self.classify, Unset):
            classify = self.classify.to_dict()

        compensate = self.compensate

        health_check = self.health_check

        method = self.method

        timeout: int | str | Unset
        if isinstance(self.timeout, Unset):
            timeout = UNSET
        else:
            timeout = self.timeout

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "endpoint": endpoint,
            }
        )
        if classify is not UNSET:
            field_dict["classify"] = classify
        if compensate is not UNSET:
            field_dict["compensate"] = compensate
        if health_check is not UNSET:
            field_dict["health_check"] = health_check
        if method is not UNSET:
            field_dict["method"] = method
        if timeout is not UNSET:
            field_dict["timeout"] = timeout

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.http_config_classify import HttpConfigClassify

        d = dict(src_dict)
        endpoint = d.pop("endpoint")

        _classify = d.pop("classify", UNSET)
        classify: HttpConfigClassify | Unset
        if isinstance(_classify, Unset):
            classify = UNSET
        else:
            classify = HttpConfigClassify.from_dict(_classify)

        compensate = d.pop("compensate", UNSET)

        health_check = d.pop("health_check", UNSET)

        method = d.pop("method", UNSET)

        def _parse_timeout(data: object) -> int | str | Unset:
            if isinstance(data, Unset):
                return data
            return cast(int | str | Unset, data)

        timeout = _parse_timeout(d.pop("timeout", UNSET))

        http_config = cls(
            endpoint=endpoint,
            classify=classify,
            compensate=compensate,
            health_check=health_check,
            method=method,
            timeout=timeout,
        )

        http_config.additional_properties = d
        return http_config

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
