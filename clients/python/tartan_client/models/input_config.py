from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.mapping_config import MappingConfig
    from ..models.script_config import ScriptConfig


T = TypeVar("T", bound="InputConfig")


@_attrs_define
class InputConfig:
    """Configuration of a required or optional input.

    Attributes:
        collect (str | Unset):
        deadline (int | Unset):
        default (str | Unset): Optional inputs only: JSON text used when no value arrives.
        for_each (bool | Unset):
        mapping (MappingConfig | None | Unset):
        match (None | ScriptConfig | Unset):
    """

    collect: str | Unset = UNSET
    deadline: int | Unset = UNSET
    default: str | Unset = UNSET
    for_each: bool | Unset = UNSET
    mapping: MappingConfig | None | Unset = UNSET
    match: None | ScriptConfig | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.mapping_config import MappingConfig
        from ..models.script_config import ScriptConfig

        collect = self.collect

        deadline = self.deadline

        default = self.default

        for_each = self.for_each

        mapping: dict[str, Any] | None | Unset
        if isinstance(self.mapping, Unset):
            mapping = UNSET
        elif isinstance(self.mapping, MappingConfig):
            mapping = self.mapping.to_dict()
        else:
            mapping = self.mapping

        match: dict[str, Any] | None | Unset
        if isinstance(self.match, Unset):
            match = UNSET
        elif isinstance(self.match, ScriptConfig):
            match = self.match.to_dict()
        else:
            match = self.match

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if collect is not UNSET:
            field_dict["collect"] = collect
        if deadline is not UNSET:
            field_dict["deadline"] = deadline
        if default is not UNSET:
            field_dict["default"] = default
        if for_each is not UNSET:
            field_dict["for_each"] = for_each
        if mapping is not UNSET:
            field_dict["mapping"] = mapping
        if match is not UNSET:
            field_dict["match"] = match

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.mapping_config import MappingConfig
        from ..models.script_config import ScriptConfig

        d = dict(src_dict)
        collect = d.pop("collect", UNSET)

        deadline = d.pop("deadline", UNSET)

        default = d.pop("default", UNSET)

        for_each = d.pop("for_each", UNSET)

        def _parse_mapping(data: object) -> MappingConfig | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                mapping_type_0 = MappingConfig.from_dict(data)

                return mapping_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(MappingConfig | None | Unset, data)

        mapping = _parse_mapping(d.pop("mapping", UNSET))

        def _parse_match(data: object) -> None | ScriptConfig | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                match_type_0 = ScriptConfig.from_dict(data)

                return match_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ScriptConfig | Unset, data)

        match = _parse_match(d.pop("match", UNSET))

        input_config = cls(
            collect=collect,
            deadline=deadline,
            default=default,
            for_each=for_each,
            mapping=mapping,
            match=match,
        )

        input_config.additional_properties = d
        return input_config

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
