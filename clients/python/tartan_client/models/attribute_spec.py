from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.const_config import ConstConfig
    from ..models.input_config import InputConfig
    from ..models.meta_config import MetaConfig
    from ..models.output_config import OutputConfig


T = TypeVar("T", bound="AttributeSpec")


@_attrs_define
class AttributeSpec:
    """One declared attribute of a step.

    Attributes:
        role (str): `required`, `optional`, `const`, `meta` or `output`; required.
        const (ConstConfig | None | Unset):
        meta (MetaConfig | None | Unset):
        optional (InputConfig | None | Unset):
        output (None | OutputConfig | Unset):
        required (InputConfig | None | Unset):
        type_ (str | Unset):
    """

    role: str
    const: ConstConfig | None | Unset = UNSET
    meta: MetaConfig | None | Unset = UNSET
    optional: InputConfig | None | Unset = UNSET
    output: None | OutputConfig | Unset = UNSET
    required: InputConfig | None | Unset = UNSET
    type_: str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.const_config import ConstConfig
        from ..models.input_config import InputConfig
        from ..models.meta_config import MetaConfig
        from ..models.output_config import OutputConfig

        role = self.role

        const: dict[str, Any] | None | Unset
        if isinstance(self.const, Unset):
            const = UNSET
        elif isinstance(self.const, ConstConfig):
            const = self.const.to_dict()
        else:
            const = self.const

        meta: dict[str, Any] | None | Unset
        if isinstance(self.meta, Unset):
            meta = UNSET
        elif isinstance(self.meta, MetaConfig):
            meta = self.meta.to_dict()
        else:
            meta = self.meta

        optional: dict[str, Any] | None | Unset
        if isinstance(self.optional, Unset):
            optional = UNSET
        elif isinstance(self.optional, InputConfig):
            optional = self.optional.to_dict()
        else:
            optional = self.optional

        output: dict[str, Any] | None | Unset
        if isinstance(self.output, Unset):
            output = UNSET
        elif isinstance(self.output, OutputConfig):
            output = self.output.to_dict()
        else:
            output = self.output

        required: dict[str, Any] | None | Unset
        if isinstance(self.required, Unset):
            required = UNSET
        elif isinstance(self.required, InputConfig):
            required = self.required.to_dict()
        else:
            required = self.required

        type_ = self.type_

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "role": role,
            }
        )
        if const is not UNSET:
            field_dict["const"] = const
        if meta is not UNSET:
            field_dict["meta"] = meta
        if optional is not UNSET:
            field_dict["optional"] = optional
        if output is not UNSET:
            field_dict["output"] = output
        if required is not UNSET:
            field_dict["required"] = required
        if type_ is not UNSET:
            field_dict["type"] = type_

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.const_config import ConstConfig
        from ..models.input_config import InputConfig
        from ..models.meta_config import MetaConfig
        from ..models.output_config import OutputConfig

        d = dict(src_dict)
        role = d.pop("role")

        def _parse_const(data: object) -> ConstConfig | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                const_type_0 = ConstConfig.from_dict(data)

                return const_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ConstConfig | None | Unset, data)

        const = _parse_const(d.pop("const", UNSET))

        def _parse_meta(data: object) -> MetaConfig | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                meta_type_0 = MetaConfig.from_dict(data)

                return meta_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(MetaConfig | None | Unset, data)

        meta = _parse_meta(d.pop("meta", UNSET))

        def _parse_optional(data: object) -> InputConfig | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                optional_type_0 = InputConfig.from_dict(data)

                return optional_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(InputConfig | None | Unset, data)

        optional = _parse_optional(d.pop("optional", UNSET))

        def _parse_output(data: object) -> None | OutputConfig | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                output_type_0 = OutputConfig.from_dict(data)

                return output_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | OutputConfig | Unset, data)

        output = _parse_output(d.pop("output", UNSET))

        def _parse_required(data: object) -> InputConfig | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                required_type_0 = InputConfig.from_dict(data)

                return required_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(InputConfig | None | Unset, data)

        required = _parse_required(d.pop("required", UNSET))

        type_ = d.pop("type", UNSET)

        attribute_spec = cls(
            role=role,
            const=const,
            meta=meta,
            optional=optional,
            output=output,
            required=required,
            type_=type_,
        )

        attribute_spec.additional_properties = d
        return attribute_spec

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
