#pragma once
// Internal to core: builds a Trace around a body made outside TraceBuilder (the skeleton of an
// event source, core/event_source.cpp) and copies a body's tables without its memory events.
#include "core/detail/trace_body.h"

#include <memory>

namespace gpumem {

class TraceAccess {
public:
    static Trace make(std::shared_ptr<detail::TraceBody> body) { return Trace(std::move(body)); }
    static const detail::TraceBody& body(const Trace& trace) { return *trace.m_body; }
};

} // namespace gpumem
