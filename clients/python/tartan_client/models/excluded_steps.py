from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.excluded_steps_blocked import ExcludedStepsBlocked
    from ..models.excluded_steps_missing import ExcludedStepsMissing
    from ..models.excluded_steps_satisfied import ExcludedStepsSatisfied


T = TypeVar("T", bound="ExcludedSteps")


@_attrs_define
class ExcludedSteps:
    """Steps met while tracing dependencies that the plan does not run.

    Attributes:
        blocked (ExcludedStepsBlocked | Unset): Inputs whose initial values make the step impossible (`collect: none`).
        missing (ExcludedStepsMissing | Unset): Required inputs nothing can provide.
        satisfied (ExcludedStepsSatisfied | Unset): Outputs already present in the initial inputs.
    """

    blocked: ExcludedStepsBlocked | Unset = UNSET
    missing: ExcludedStepsMissing | Unset = UNSET
    satisfied: ExcludedStepsSatisfied | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        blocked: dict[str, Any] | Unset = UNSET
        if not isinstance(self.blocked, Unset):
            blocked = self.blocked.to_dict()

        missing: dict[str, Any] | Unset = UNSET
        if not isinstance(self.missing, Unset):
            missing = self.missing.to_dict()

        satisfied: dict[str, Any] | Unset = UNSET
        if not isinstance(self.satisfied, Unset):
            satisfied = self.satisfied.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update({})
        if blocked is not UNSET:
            field_dict["blocked"] = blocked
        if missing is not UNSET:
            field_dict["missing"] = missing
        if satisfied is not UNSET:
            field_dict["satisfied"] = satisfied

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.excluded_steps_blocked import ExcludedStepsBlocked
        from ..models.excluded_steps_missing import ExcludedStepsMissing
        from ..models.excluded_steps_satisfied import ExcludedStepsSatisfied

        d = dict(src_dict)
        _blocked = d.pop("blocked", UNSET)
        blocked: ExcludedStepsBlocked | Unset
        if isinstance(_blocked, Unset):
            blocked = UNSET
        else:
            blocked = ExcludedStepsBlocked.from_dict(_blocked)

        _missing = d.pop("missing", UNSET)
        missing: ExcludedStepsMissing | Unset
        if isinstance(_missing, Unset):
            missing = UNSET
        else:
            missing = ExcludedStepsMissing.from_dict(_missing)

        _satisfied = d.pop("satisfied", UNSET)
        satisfied: ExcludedStepsSatisfied | Unset
        if isinstance(_satisfied, Unset):
            satisfied = UNSET
        else:
            satisfied = ExcludedStepsSatisfied.from_dict(_satisfied)

        excluded_steps = cls(
            blocked=blocked,
            missing=missing,
            satisfied=satisfied,
        )

        excluded_steps.additional_properties = d
        return excluded_steps

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
