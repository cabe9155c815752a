from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

if TYPE_CHECKING:
    from ..models.execution_plan_children_additional_property import (
        ExecutionPlanChildrenAdditionalProperty,
    )


T = TypeVar("T", bound="ExecutionPlanChildren")


@_attrs_define
class ExecutionPlanChildren:
    """The plans of the sub-flows its flow steps run, by step id
    (docs/steps.md, "Sub-flows").

    """

    additional_properties: dict[str, ExecutionPlanChildrenAdditionalProperty] = (
        _attrs_field(init=False, factory=dict)
    )

    def to_dict(self) -> dict[str, Any]:

        field_dict: dict[str, Any] = {}
        for prop_name, prop in self.additional_properties.items():
            field_dict[prop_name] = prop.to_dict()

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.execution_plan_children_additional_property import (
            ExecutionPlanChildrenAdditionalProperty,
        )

        d = dict(src_dict)
        execution_plan_children = cls()

        additional_properties = {}
        for prop_name, prop_dict in d.items():
            additional_property = ExecutionPlanChildrenAdditionalProperty.from_dict(
                prop_dict
            )

            additional_properties[prop_name] = additional_property

        execution_plan_children.additional_properties = additional_properties
        return execution_plan_children

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> ExecutionPlanChildrenAdditionalProperty:
        return self.additional_properties[key]

    def __setitem__(
        self, key: str, value: ExecutionPlanChildrenAdditionalProperty
    ) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties
