"""The subset of XLA's ``HloProto`` that advisor reads, declared for protobuf.

Neither jax nor xprof ships Python bindings for ``xla/service/hlo.proto``, so we
declare the few messages we need with the upstream field numbers (openxla/xla
``xla/service/hlo.proto`` and ``xla/xla_data.proto``). Fields we do not declare
are skipped by the protobuf parser, so newer XLA versions still parse.
"""

from .protos import message_class

_SCHEMA = """
name: "advisor_hlo_subset.proto"
package: "advisor_xla"
syntax: "proto3"
message_type {
  name: "LayoutProto"
  field { name: "minor_to_major" number: 1 label: LABEL_REPEATED type: TYPE_INT64 }
}
message_type {
  name: "ShapeProto"
  field { name: "element_type" number: 2 label: LABEL_OPTIONAL type: TYPE_INT32 }
  field { name: "dimensions" number: 3 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "tuple_shapes" number: 4 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xla.ShapeProto" }
  field { name: "layout" number: 5 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.LayoutProto" }
}
message_type {
  name: "OpMetadata"
  field { name: "op_type" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "op_name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "source_file" number: 3 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "source_line" number: 4 label: LABEL_OPTIONAL type: TYPE_INT32 }
  field { name: "stack_frame_id" number: 15 label: LABEL_OPTIONAL type: TYPE_INT32 }
}
message_type {
  name: "OpSharding"
  field { name: "type" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 }
  field { name: "tile_assignment_dimensions" number: 3 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "tile_assignment_devices" number: 4 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "replicate_on_last_tile_dim" number: 6 label: LABEL_OPTIONAL type: TYPE_BOOL }
  field { name: "last_tile_dims" number: 8 label: LABEL_REPEATED type: TYPE_INT32 }
  field { name: "iota_reshape_dims" number: 9 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "iota_transpose_perm" number: 10 label: LABEL_REPEATED type: TYPE_INT32 }
}
message_type {
  name: "ReplicaGroup"
  field { name: "replica_ids" number: 1 label: LABEL_REPEATED type: TYPE_INT64 }
}
message_type {
  name: "IotaReplicaGroupListProto"
  field { name: "num_replica_groups" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "num_devices_per_group" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "iota_reshape_dims" number: 3 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "iota_transpose_perm" number: 4 label: LABEL_REPEATED type: TYPE_INT32 }
}
message_type {
  name: "SourceTarget"
  field { name: "source" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "target" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 }
}
message_type {
  name: "CollectiveDeviceListProto"
  field { name: "replica_groups" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xla.ReplicaGroup" }
  field { name: "iota_replica_group_list" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.IotaReplicaGroupListProto" }
}
message_type {
  name: "LiteralProto"
  field { name: "s32s" number: 4 label: LABEL_REPEATED type: TYPE_INT32 }
  field { name: "s64s" number: 5 label: LABEL_REPEATED type: TYPE_INT64 }
}
message_type {
  name: "DotDimensionNumbers"
  field { name: "lhs_contracting_dimensions" number: 1 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "rhs_contracting_dimensions" number: 2 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "lhs_batch_dimensions" number: 3 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "rhs_batch_dimensions" number: 4 label: LABEL_REPEATED type: TYPE_INT64 }
}
message_type {
  name: "WindowDimension"
  field { name: "size" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "stride" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "padding_low" number: 3 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "padding_high" number: 4 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "window_dilation" number: 5 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "base_dilation" number: 6 label: LABEL_OPTIONAL type: TYPE_INT64 }
}
message_type {
  name: "Window"
  field { name: "dimensions" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xla.WindowDimension" }
}
message_type {
  name: "ConvolutionDimensionNumbers"
  field { name: "kernel_input_feature_dimension" number: 3 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "kernel_output_feature_dimension" number: 4 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "kernel_spatial_dimensions" number: 6 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "input_batch_dimension" number: 7 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "input_feature_dimension" number: 8 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "output_batch_dimension" number: 9 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "output_feature_dimension" number: 10 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "input_spatial_dimensions" number: 11 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "output_spatial_dimensions" number: 12 label: LABEL_REPEATED type: TYPE_INT64 }
}
message_type {
  name: "HloInstructionProto"
  field { name: "name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "opcode" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "shape" number: 3 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.ShapeProto" }
  field { name: "metadata" number: 7 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.OpMetadata" }
  field { name: "literal" number: 8 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.LiteralProto" }
  field { name: "parameter_number" number: 9 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "fusion_kind" number: 11 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "dimensions" number: 14 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "window" number: 15 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.Window" }
  field { name: "convolution_dimension_numbers" number: 16 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.ConvolutionDimensionNumbers" }
  field { name: "dot_dimension_numbers" number: 30 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.DotDimensionNumbers" }
  field { name: "feature_group_count" number: 50 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "batch_group_count" number: 58 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "custom_call_target" number: 28 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "backend_config" number: 43 label: LABEL_OPTIONAL type: TYPE_BYTES }
  field { name: "id" number: 35 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "operand_ids" number: 36 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "called_computation_ids" number: 38 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "sharding" number: 40 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.OpSharding" }
  field { name: "replica_groups" number: 49 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xla.ReplicaGroup" }
  field { name: "source_target_pairs" number: 52 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xla.SourceTarget" }
  field { name: "collective_device_list" number: 87 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.CollectiveDeviceListProto" }
  field { name: "iota_device_list" number: 92 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.IotaReplicaGroupListProto" }
}
message_type {
  name: "HloComputationProto"
  field { name: "name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "instructions" number: 2 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xla.HloInstructionProto" }
  field { name: "id" number: 5 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "root_id" number: 6 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "is_fusion_computation" number: 7 label: LABEL_OPTIONAL type: TYPE_BOOL }
}
message_type {
  name: "AliasEntryProto"
  field { name: "output_shape_index" number: 1 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "parameter_number" number: 2 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "parameter_shape_index" number: 3 label: LABEL_REPEATED type: TYPE_INT64 }
  field { name: "kind" number: 4 label: LABEL_OPTIONAL type: TYPE_INT32 }
}
message_type {
  name: "HloInputOutputAliasProto"
  field { name: "entries" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xla.AliasEntryProto" }
}
message_type {
  name: "FileLocation"
  field { name: "file_name_id" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 }
  field { name: "function_name_id" number: 2 label: LABEL_OPTIONAL type: TYPE_INT32 }
  field { name: "line" number: 3 label: LABEL_OPTIONAL type: TYPE_INT32 }
}
message_type {
  name: "StackFrame"
  field { name: "file_location_id" number: 1 label: LABEL_OPTIONAL type: TYPE_INT32 }
  field { name: "parent_frame_id" number: 2 label: LABEL_OPTIONAL type: TYPE_INT32 }
}
message_type {
  name: "StackFrameIndexProto"
  field { name: "file_names" number: 1 label: LABEL_REPEATED type: TYPE_STRING }
  field { name: "function_names" number: 2 label: LABEL_REPEATED type: TYPE_STRING }
  field { name: "file_locations" number: 3 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xla.FileLocation" }
  field { name: "stack_frames" number: 4 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xla.StackFrame" }
}
message_type {
  name: "InstructionSequence"
  field { name: "instruction_ids" number: 1 label: LABEL_REPEATED type: TYPE_INT64 }
}
message_type {
  name: "ScheduleEntry"
  field { name: "key" number: 1 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "value" number: 2 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.InstructionSequence" }
}
message_type {
  name: "HloScheduleProto"
  field { name: "sequences" number: 1 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xla.ScheduleEntry" }
}
message_type {
  name: "HloModuleProto"
  field { name: "name" number: 1 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "entry_computation_name" number: 2 label: LABEL_OPTIONAL type: TYPE_STRING }
  field { name: "computations" number: 3 label: LABEL_REPEATED type: TYPE_MESSAGE type_name: ".advisor_xla.HloComputationProto" }
  field { name: "id" number: 5 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "entry_computation_id" number: 6 label: LABEL_OPTIONAL type: TYPE_INT64 }
  field { name: "schedule" number: 7 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.HloScheduleProto" }
  field { name: "input_output_alias" number: 8 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.HloInputOutputAliasProto" }
  field { name: "stack_frame_index" number: 17 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.StackFrameIndexProto" }
}
message_type {
  name: "HloProto"
  field { name: "hlo_module" number: 1 label: LABEL_OPTIONAL type: TYPE_MESSAGE type_name: ".advisor_xla.HloModuleProto" }
}
"""



HloProto = message_class(_SCHEMA, "advisor_xla.HloProto")
