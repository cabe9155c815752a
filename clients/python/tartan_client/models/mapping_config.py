from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.script_config import ScriptConfig


T = TypeVar("T", bound="MappingConfig")


@_attrs_define
class MappingConfig:
    """Renames an attribute on the wire (`name`: the name the step itself uses),
    or computes its value (`script`), or both.

        Attributes:
            name (str | Unset):
            script (None | ScriptConfig | Unset):
    """

    name: str | Unset = UNSET
    script: None | ScriptConfig | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.script_config import ScriptConfig

        name = self.name

        script: dict[str, Any] | None | Unset
        if isinstance(self.script, Unset):
            script = UNSET
        elif isinstance(self.script, ScriptConfig):
            script = self.script.to_dict()
        else:
            script = self.script

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if name is not UNSET:
            field_dict["name"] = name
        if script is not UNSET:
            field_dict["script"] = script

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.script_config import ScriptConfig

        d = dict(src_dict)
        name = d.pop("name", UNSET)

        def _parse_script(data: object) -> None | ScriptConfig | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                script_type_0 = ScriptConfig.from_dict(data)

                return script_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ScriptConfig | Unset, data)

        script = _parse_script(d.pop("script", UNSET))

        mapping_config = cls(
            name=name,
            script=script,
        )

        mapping_config.additional_properties = d
        return mapping_config

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
