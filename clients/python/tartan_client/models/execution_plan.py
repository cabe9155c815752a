from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.excluded_steps import ExcludedSteps
    from ..models.execution_plan_attributes import ExecutionPlanAttributes
    from ..models.execution_plan_children import ExecutionPlanChildren
    from ..models.execution_plan_steps import ExecutionPlanSteps


T = TypeVar("T", bound="ExecutionPlan")


@_attrs_define
class ExecutionPlan:
    """The compiled plan of a flow, in Argyll's shape. Its steps carry their
    typed policies: a plan read back from storage parses them again, once.

        Attributes:
            attributes (ExecutionPlanAttributes): Who provides and consumes each attribute.
            excluded (ExcludedSteps): Steps met while tracing dependencies that the plan does not run.
            goals (list[str]):
            required (list[str]):
            steps (ExecutionPlanSteps): Shared with the catalog: a plan copies no step definition.
            children (ExecutionPlanChildren | Unset): The plans of the sub-flows its flow steps run, by step id
                (docs/steps.md, "Sub-flows").
    """

    attributes: ExecutionPlanAttributes
    excluded: ExcludedSteps
    goals: list[str]
    required: list[str]
    steps: ExecutionPlanSteps
    children: ExecutionPlanChildren | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        attributes = self.attributes.to_dict()

        excluded = self.excluded.to_dict()

        goals = self.goals

        required = self.required

        steps = self.steps.to_dict()

        children: dict[str, Any] | Unset = UNSET
        if not isinstance(self.children, Unset):
            children = self.children.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "attributes": attributes,
                "excluded": excluded,
                "goals": goals,
                "required": required,
                "steps": steps,
            }
        )
        if children is not UNSET:
            field_dict["children"] = children

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.excluded_steps import ExcludedSteps
        from ..models.execution_plan_attributes import ExecutionPlanAttributes
        from ..models.execution_plan_children import ExecutionPlanChildren
        from ..models.execution_plan_steps import ExecutionPlanSteps

        d = dict(src_dict)
        attributes = ExecutionPlanAttributes.from_dict(d.pop("attributes"))

        excluded = ExcludedSteps.from_dict(d.pop("excluded"))

        goals = cast(list[str], d.pop("goals"))

        required = cast(list[str], d.pop("required"))

        steps = ExecutionPlanSteps.from_dict(d.pop("steps"))

        _children = d.pop("children", UNSET)
        children: ExecutionPlanChildren | Unset
        if isinstance(_children, Unset):
            children = UNSET
        else:
            children = ExecutionPlanChildren.from_dict(_children)

        execution_plan = cls(
            attributes=attributes,
            excluded=excluded,
            goals=goals,
            required=required,
            steps=steps,
            children=children,
        )

        execution_plan.additional_properties = d
        return execution_plan

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
