"""Contains all the data models used in inputs/outputs"""

from .attempt import Attempt
from .attempt_outcome import AttemptOutcome
from .attribute_edges import AttributeEdges
from .attribute_spec import AttributeSpec
from .attribute_value import AttributeValue
from .breaker_shown import BreakerShown
from .bulk_cancel_request import BulkCancelRequest
from .bulk_dry_run import BulkDryRun
from .bulk_failure import BulkFailure
from .bulk_filter_request import BulkFilterRequest
from .bulk_filter_request_labels import BulkFilterRequestLabels
from .bulk_job_list import BulkJobList
from .bulk_job_view import BulkJobView
from .bulk_job_view_filter import BulkJobViewFilter
from .bulk_resume_request import BulkResumeRequest
from .bulk_retry_request import BulkRetryRequest
from .catalog_state import CatalogState
from .catalog_state_attributes import CatalogStateAttributes
from .catalog_state_steps import CatalogStateSteps
from .cluster_state import ClusterState
from .cluster_state_nodes import ClusterStateNodes
from .concurrency import Concurrency
from .const_config import ConstConfig
from .delay_parts import DelayParts
from .deliver_webhook_body import DeliverWebhookBody
from .engine_state import EngineState
from .engine_state_health import EngineStateHealth
from .event import Event
from .event_list import EventList
from .excluded_steps import ExcludedSteps
from .excluded_steps_blocked import ExcludedStepsBlocked
from .excluded_steps_missing import ExcludedStepsMissing
from .excluded_steps_satisfied import ExcludedStepsSatisfied
from .execution_plan import ExecutionPlan
from .execution_plan_attributes import ExecutionPlanAttributes
from .execution_plan_children import ExecutionPlanChildren
from .execution_plan_children_additional_property import (
    ExecutionPlanChildrenAdditionalProperty,
)
from .execution_plan_steps import ExecutionPlanSteps
from .execution_state import ExecutionState
from .execution_state_inputs import ExecutionStateInputs
from .execution_state_outputs_type_0 import ExecutionStateOutputsType0
from .execution_state_work_items import ExecutionStateWorkItems
from .feed_message import FeedMessage
from .fire_shown import FireShown
from .flow_answer import FlowAnswer
from .flow_cancelled import FlowCancelled
from .flow_config import FlowConfig
from .flow_page import FlowPage
from .flow_resumed import FlowResumed
from .flow_retried import FlowRetried
from .flow_state import FlowState
from .flow_state_attributes import FlowStateAttributes
from .flow_state_executions import FlowStateExecutions
from .flow_state_input_deadlines import FlowStateInputDeadlines
from .flow_state_labels import FlowStateLabels
from .flow_status import FlowStatus
from .flow_status_answer import FlowStatusAnswer
from .flow_summary import FlowSummary
from .flow_summary_labels import FlowSummaryLabels
from .flow_trace import FlowTrace
from .flow_turn_answer import FlowTurnAnswer
from .get_open_api_document_response_200 import GetOpenApiDocumentResponse200
from .health import Health
from .health_backend import HealthBackend
from .health_details import HealthDetails
from .health_streams import HealthStreams
from .http_config import HttpConfig
from .http_config_classify import HttpConfigClassify
from .input_config import InputConfig
from .lane_here import LaneHere
from .lane_list import LaneList
from .lane_pause import LanePause
from .lane_shown import LaneShown
from .lane_shown_limits import LaneShownLimits
from .lane_wait_shown import LaneWaitShown
from .last_fire_shown import LastFireShown
from .mapping_config import MappingConfig
from .message import Message
from .meta_config import MetaConfig
from .node_state import NodeState
from .node_state_health import NodeStateHealth
from .on_timeout import OnTimeout
from .output_config import OutputConfig
from .parent_link import ParentLink
from .plan_request import PlanRequest
from .plan_request_init import PlanRequestInit
from .problem import Problem
from .query_request import QueryRequest
from .query_request_labels import QueryRequestLabels
from .ready import Ready
from .resume_body import ResumeBody
from .retry_body import RetryBody
from .retry_state import RetryState
from .schedule_flow import ScheduleFlow
from .schedule_flow_init import ScheduleFlowInit
from .schedule_flow_labels import ScheduleFlowLabels
from .schedule_list import ScheduleList
from .schedule_request import ScheduleRequest
from .schedule_shown import ScheduleShown
from .script_config import ScriptConfig
from .session import Session
from .start_flow import StartFlow
from .start_flow_init import StartFlowInit
from .start_flow_labels import StartFlowLabels
from .step import Step
from .step_attributes import StepAttributes
from .step_health import StepHealth
from .step_labels import StepLabels
from .step_limits_type_0 import StepLimitsType0
from .step_list import StepList
from .step_saved import StepSaved
from .step_status import StepStatus
from .stream_flow_events_response_200 import StreamFlowEventsResponse200
from .trigger_answer import TriggerAnswer
from .work_config import WorkConfig
from .work_item import WorkItem
from .work_list import WorkList
from .work_retried import WorkRetried
from .work_state import WorkState
from .work_state_inputs import WorkStateInputs
from .work_state_outputs_type_0 import WorkStateOutputsType0
from .work_status import WorkStatus

__all__ = (
    "Attempt",
    "AttemptOutcome",
    "AttributeEdges",
    "AttributeSpec",
    "AttributeValue",
    "BreakerShown",
    "BulkCancelRequest",
    "BulkDryRun",
    "BulkFailure",
    "BulkFilterRequest",
    "BulkFilterRequestLabels",
    "BulkJobList",
    "BulkJobView",
    "BulkJobViewFilter",
    "BulkResumeRequest",
    "BulkRetryRequest",
    "CatalogState",
    "CatalogStateAttributes",
    "CatalogStateSteps",
    "ClusterState",
    "ClusterStateNodes",
    "Concurrency",
    "ConstConfig",
    "DelayParts",
    "DeliverWebhookBody",
    "EngineState",
    "EngineStateHealth",
    "Event",
    "EventList",
    "ExcludedSteps",
    "ExcludedStepsBlocked",
    "ExcludedStepsMissing",
    "ExcludedStepsSatisfied",
    "ExecutionPlan",
    "ExecutionPlanAttributes",
    "ExecutionPlanChildren",
    "ExecutionPlanChildrenAdditionalProperty",
    "ExecutionPlanSteps",
    "ExecutionState",
    "ExecutionStateInputs",
    "ExecutionStateOutputsType0",
    "ExecutionStateWorkItems",
    "FeedMessage",
    "FireShown",
    "FlowAnswer",
    "FlowCancelled",
    "FlowConfig",
    "FlowPage",
    "FlowResumed",
    "FlowRetried",
    "FlowState",
    "FlowStateAttributes",
    "FlowStateExecutions",
    "FlowStateInputDeadlines",
    "FlowStateLabels",
    "FlowStatus",
    "FlowStatusAnswer",
    "FlowSummary",
    "FlowSummaryLabels",
    "FlowTrace",
    "FlowTurnAnswer",
    "GetOpenApiDocumentResponse200",
    "Health",
    "HealthBackend",
    "HealthDetails",
    "HealthStreams",
    "HttpConfig",
    "HttpConfigClassify",
    "InputConfig",
    "LaneHere",
    "LaneList",
    "LanePause",
    "LaneShown",
    "LaneShownLimits",
    "LaneWaitShown",
    "LastFireShown",
    "MappingConfig",
    "Message",
    "MetaConfig",
    "NodeState",
    "NodeStateHealth",
    "OnTimeout",
    "OutputConfig",
    "ParentLink",
    "PlanRequest",
    "PlanRequestInit",
    "Problem",
    "QueryRequest",
    "QueryRequestLabels",
    "Ready",
    "ResumeBody",
    "RetryBody",
    "RetryState",
    "ScheduleFlow",
    "ScheduleFlowInit",
    "ScheduleFlowLabels",
    "ScheduleList",
    "ScheduleRequest",
    "ScheduleShown",
    "ScriptConfig",
    "Session",
    "StartFlow",
    "StartFlowInit",
    "StartFlowLabels",
    "Step",
    "StepAttributes",
    "StepHealth",
    "StepLabels",
    "StepLimitsType0",
    "StepList",
    "StepSaved",
    "StepStatus",
    "StreamFlowEventsResponse200",
    "TriggerAnswer",
    "WorkConfig",
    "WorkItem",
    "WorkList",
    "WorkRetried",
    "WorkState",
    "WorkStateInputs",
    "WorkStateOutputsType0",
    "WorkStatus",
)
