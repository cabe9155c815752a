from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="WorkConfig")


@_attrs_define
class WorkConfig:
    """Retry and parallelism settings; zero or absent values take the global
    defaults when the step is registered, and those are stored with it.

        Attributes:
            backoff_type (str | Unset):
            init_backoff (int | str | Unset): The first retry's delay; 0 or absent: the engine default. Milliseconds, or a
                duration such as `5s` (docs/durations.md); shown as milliseconds.
            max_backoff (int | str | Unset): The longest delay between retries; 0 or absent: the engine default.
                Milliseconds, or a duration such as `5s` (docs/durations.md); shown as milliseconds.
            max_retries (int | Unset):
            parallelism (int | Unset):
    """

    backoff_type: str | Unset = UNSET
    init_backoff: int | str | Unset = UNSET
    max_backoff: int | str | Unset = UNSET
    max_retries: int | Unset = UNSET
    parallelism: int | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        backoff_type = self.backoff_type

        init_backoff: int | str | Unset
        if isinstance(self.init_backoff, Unset):
            init_backoff = UNSET
        else:
            init_backoff = self.init_backoff

        max_backoff: int | str | Unset
        if isinstance(self.max_backoff, Unset):
            max_backoff = UNSET
        else:
            max_backoff = self.max_backoff

        max_retries = self.max_retries

        parallelism = self.parallelism

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if backoff_type is not UNSET:
            field_dict["backoff_type"] = backoff_type
        if init_backoff is not UNSET:
            field_dict["init_backoff"] = init_backoff
        if max_backoff is not UNSET:
            field_dict["max_backoff"] = max_backoff
        if max_retries is not UNSET:
            field_dict["max_retries"] = max_retries
        if parallelism is not UNSET:
            field_dict["parallelism"] = parallelism

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        backoff_type = d.pop("backoff_type", UNSET)

        def _parse_init_backoff(data: object) -> int | str | Unset:
            if isinstance(data, Unset):
                return data
            return cast(int | str | Unset, data)

        init_backoff = _parse_init_backoff(d.pop("init_backoff", UNSET))

        def _parse_max_backoff(data: object) -> int | str | Unset:
            if isinstance(data, Unset):
                return data
            return cast(int | str | Unset, data)

        max_backoff = _parse_max_backoff(d.pop("max_backoff", UNSET))

        max_retries = d.pop("max_retries", UNSET)

        parallelism = d.pop("parallelism", UNSET)

        work_config = cls(
            backoff_type=backoff_type,
            init_backoff=init_backoff,
            max_backoff=max_backoff,
            max_retries=max_retries,
            parallelism=parallelism,
        )

        work_config.additional_properties = d
        return work_config

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
