"""Message classes from a FileDescriptorProto written as text.

The protos advisor reads (XLA's HloProto, pprof's Profile) ship no Python bindings in any
installed package; each reader declares the fields it needs, with the upstream numbers,
and gets its message class here. Undeclared fields are skipped by the parser.
"""

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format


def message_class(schema: str, full_name: str):
    fdp = text_format.Parse(schema, descriptor_pb2.FileDescriptorProto())
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(full_name))
