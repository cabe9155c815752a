from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.flow_config import FlowConfig
    from ..models.http_config import HttpConfig
    from ..models.script_config import ScriptConfig
    from ..models.step_attributes import StepAttributes
    from ..models.step_labels import StepLabels
    from ..models.step_limits_type_0 import StepLimitsType0
    from ..models.work_config import WorkConfig


T = TypeVar("T", bound="Step")


@_attrs_define
class Step:
    """A registered step: an HTTP endpoint with declared inputs and outputs.

    Attributes:
        id (str): Sanitised, unique id; required.
        name (str): Human name, required.
        type_ (str): `sync`, `async`, `script` or `flow`; required.
        attributes (StepAttributes | Unset): Inputs and outputs by attribute name.
        effective_retry (Any | Unset): The normalised retry policy, every value explicit. Read-only: what a
            client sends is replaced when the step is normalised.
        effective_timeouts (Any | Unset): The normalised timeouts, every value explicit. Read-only, like
            `effective_retry`.
        flow (FlowConfig | None | Unset):
        http (HttpConfig | None | Unset):
        labels (StepLabels | Unset):
        limits (None | StepLimitsType0 | Unset): Limits the step's calls share across flows and processes
            (`concurrency`, `rate`, `burst`, `breaker`; docs/lanes.md), kept as
            given; parsed into `StepPolicies::lane`.
        memo_ttl (int | str | Unset): How long a memoized answer is reused; 0 or absent: until the memo's bound evicts
            it. Milliseconds, or a duration such as `5s` (docs/durations.md); shown as milliseconds.
        memoizable (bool | Unset): A call's answer is reused for an identical call (docs/steps.md,
            "Memoization").
        predicate (None | ScriptConfig | Unset):
        retry (Any | Unset): A retry policy in another system's dialect (Steep, OpenWorkflow /
            Temporal, Serverless Workflow), kept as given.
        script (None | ScriptConfig | Unset):
        timeouts (Any | Unset): Timeouts (`attempt`, `inactivity`, `total`, `on_timeout`, or Steep's
            `maxRuntime`, `maxInactivity`, `deadline`), kept as given.
        work_config (None | Unset | WorkConfig):
    """

    id: str
    name: str
    type_: str
    attributes: StepAttributes | Unset = UNSET
    effective_retry: Any | Unset = UNSET
    effective_timeouts: Any | Unset = UNSET
    flow: FlowConfig | None | Unset = UNSET
    http: HttpConfig | None | Unset = UNSET
    labels: StepLabels | Unset = UNSET
    limits: None | StepLimitsType0 | Unset = UNSET
    memo_ttl: int | str | Unset = UNSET
    memoizable: bool | Unset = UNSET
    predicate: None | ScriptConfig | Unset = UNSET
    retry: Any | Unset = UNSET
    script: None | ScriptConfig | Unset = UNSET
    timeouts: Any | Unset = UNSET
    work_config: None | Unset | WorkConfig = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        from ..models.flow_config import FlowConfig
        from ..models.http_config import HttpConfig
        from ..models.script_config import ScriptConfig
        from ..models.step_limits_type_0 import StepLimitsType0
        from ..models.work_config import WorkConfig

        id = self.id

        name = self.name

        type_ = self.type_

        attributes: dict[str, Any] | Unset = UNSET
        if not isinstance(self.attributes, Unset):
            attributes = self.attributes.to_dict()

        effective_retry = self.effective_retry

        effective_timeouts = self.effective_timeouts

        flow: dict[str, Any] | None | Unset
        if isinstance(self.flow, Unset):
            flow = UNSET
        elif isinstance(self.flow, FlowConfig):
            flow = self.flow.to_dict()
        else:
            flow = self.flow

        http: dict[str, Any] | None | Unset
        if isinstance(self.http, Unset):
            http = UNSET
        elif isinstance(self.http, HttpConfig):
            http = self.http.to_dict()
        else:
            http = self.http

        labels: dict[str, Any] | Unset = UNSET
        if not isinstance(self.labels, Unset):
            labels = self.labels.to_dict()

        limits: dict[str, Any] | None | Unset
        if isinstance(self.limits, Unset):
            limits = UNSET
        elif isinstance(self.limits, StepLimitsType0):
            limits = self.limits.to_dict()
        else:
            limits = self.limits

        memo_ttl: int | str | Unset
        if isinstance(self.memo_ttl, Unset):
            memo_ttl = UNSET
        else:
            memo_ttl = self.memo_ttl

        memoizable = self.memoizable

        predicate: dict[str, Any] | None | Unset
        if isinstance(self.predicate, Unset):
            predicate = UNSET
        elif isinstance(self.predicate, ScriptConfig):
            predicate = self.predicate.to_dict()
        else:
            predicate = self.predicate

        retry = self.retry

        script: dict[str, Any] | None | Unset
        if isinstance(self.script, Unset):
            script = UNSET
        elif isinstance(self.script, ScriptConfig):
            script = self.script.to_dict()
        else:
            script = self.script

        timeouts = self.timeouts

        work_config: dict[str, Any] | None | Unset
        if isinstance(self.work_config, Unset):
            work_config = UNSET
        elif isinstance(self.work_config, WorkConfig):
            work_config = self.work_config.to_dict()
        else:
            work_config = self.work_config

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "id": id,
                "name": name,
                "type": type_,
            }
        )
        if attributes is not UNSET:
            field_dict["attributes"] = attributes
        if effective_retry is not UNSET:
            field_dict["effective_retry"] = effective_retry
        if effective_timeouts is not UNSET:
            field_dict["effective_timeouts"] = effective_timeouts
        if flow is not UNSET:
            field_dict["flow"] = flow
        if http is not UNSET:
            field_dict["http"] = http
        if labels is not UNSET:
            field_dict["labels"] = labels
        if limits is not UNSET:
            field_dict["limits"] = limits
        if memo_ttl is not UNSET:
            field_dict["memo_ttl"] = memo_ttl
        if memoizable is not UNSET:
            field_dict["memoizable"] = memoizable
        if predicate is not UNSET:
            field_dict["predicate"] = predicate
        if retry is not UNSET:
            field_dict["retry"] = retry
        if script is not UNSET:
            field_dict["script"] = script
        if timeouts is not UNSET:
            field_dict["timeouts"] = timeouts
        if work_config is not UNSET:
            field_dict["work_config"] = work_config

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        from ..models.flow_config import FlowConfig
        from ..models.http_config import HttpConfig
        from ..models.script_config import ScriptConfig
        from ..models.step_attributes import StepAttributes
        from ..models.step_labels import StepLabels
        from ..models.step_limits_type_0 import StepLimitsType0
        from ..models.work_config import WorkConfig

        d = dict(src_dict)
        id = d.pop("id")

        name = d.pop("name")

        type_ = d.pop("type")

        _attributes = d.pop("attributes", UNSET)
        attributes: StepAttributes | Unset
        if isinstance(_attributes, Unset):
            attributes = UNSET
        else:
            attributes = StepAttributes.from_dict(_attributes)

        effective_retry = d.pop("effective_retry", UNSET)

        effective_timeouts = d.pop("effective_timeouts", UNSET)

        def _parse_flow(data: object) -> FlowConfig | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                flow_type_0 = FlowConfig.from_dict(data)

                return flow_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(FlowConfig | None | Unset, data)

        flow = _parse_flow(d.pop("flow", UNSET))

        def _parse_http(data: object) -> HttpConfig | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                http_type_0 = HttpConfig.from_dict(data)

                return http_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(HttpConfig | None | Unset, data)

        http = _parse_http(d.pop("http", UNSET))

        _labels = d.pop("labels", UNSET)
        labels: StepLabels | Unset
        if isinstance(_labels, Unset):
            labels = UNSET
        else:
            labels = StepLabels.from_dict(_labels)

        def _parse_limits(data: object) -> None | StepLimitsType0 | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                limits_type_0 = StepLimitsType0.from_dict(data)

                return limits_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | StepLimitsType0 | Unset, data)

        limits = _parse_limits(d.pop("limits", UNSET))

        def _parse_memo_ttl(data: object) -> int | str | Unset:
            if isinstance(data, Unset):
                return data
            return cast(int | str | Unset, data)

        memo_ttl = _parse_memo_ttl(d.pop("memo_ttl", UNSET))

        memoizable = d.pop("memoizable", UNSET)

        def _parse_predicate(data: object) -> None | ScriptConfig | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                predicate_type_0 = ScriptConfig.from_dict(data)

                return predicate_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | ScriptConfig | Unset, data)

        predicate = _parse_predicate(d.pop("predicate", UNSET))

        retry = d.pop("retry", UNSET)

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

        timeouts = d.pop("timeouts", UNSET)

        def _parse_work_config(data: object) -> None | Unset | WorkConfig:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, dict):
                    raise TypeError()
                work_config_type_0 = WorkConfig.from_dict(data)

                return work_config_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(None | Unset | WorkConfig, data)

        work_config = _parse_work_config(d.pop("work_config", UNSET))

        step = cls(
            id=id,
            name=name,
            type_=type_,
            attributes=attributes,
            effective_retry=effective_retry,
            effective_timeouts=effective_timeouts,
            flow=flow,
            http=http,
            labels=labels,
            limits=limits,
            memo_ttl=memo_ttl,
            memoizable=memoizable,
            predicate=predicate,
            retry=retry,
            script=script,
            timeouts=timeouts,
            work_config=work_config,
        )

        step.additional_properties = d
        return step

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
