from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="FlowTrace")


@_attrs_define
class FlowTrace:
    """The W3C trace context a flow keeps from its start (docs/operating.md, "Traces"),
    so that its calls, after a restart too, carry the trace it began in.

        Attributes:
            sampled (bool): Whether the trace is sampled (the caller's flag, when there was one).
            span_id (str): 16 lowercase hex digits: the flow's start span, parent of the spans
                of its decisions and calls.
            trace_id (str): 32 lowercase hex digits: the caller's trace, or one made at start.
            parent_id (None | str | Unset): The caller's span, from the `traceparent` the flow was started with.
            state (None | str | Unset): The caller's `tracestate`, kept with the flow and sent on with its
                calls (W3C Trace Context: vendors' data that travels with the trace).
    """

    sampled: bool
    span_id: str
    trace_id: str
    parent_id: None | str | Unset = UNSET
    state: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        sampled = self.sampled

        span_id = self.span_id

        trace_id = self.trace_id

        parent_id: None | str | Unset
        if isinstance(self.parent_id, Unset):
            parent_id = UNSET
        else:
            parent_id = self.parent_id

        state: None | str | Unset
        if isinstance(self.state, Unset):
            state = UNSET
        else:
            state = self.state

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "sampled": sampled,
                "span_id": span_id,
                "trace_id": trace_id,
            }
        )
        if parent_id is not UNSET:
            field_dict["parent_id"] = parent_id
        if state is not UNSET:
            field_dict["state"] = state

        return field_dict

    @classmethod
    def from_dict(cls, src_dict: Mapping[str, Any]) -> Self:
        d = dict(src_dict)
        sampled = d.pop("sampled")

        span_id = d.pop("span_id")

        trace_id = d.pop("trace_id")

        def _parse_parent_id(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        parent_id = _parse_parent_id(d.pop("parent_id", UNSET))

        def _parse_state(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        state = _parse_state(d.pop("state", UNSET))

        flow_trace = cls(
            sampled=sampled,
            span_id=span_id,
            trace_id=trace_id,
            parent_id=parent_id,
            state=state,
        )

        flow_trace.additional_properties = d
        return flow_trace

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
