#pragma once
// Operation-stopping failures. Every gpumem error derives from gpumem::Error and carries a message
// that says what went wrong and what to do (file, offset, field). They are caught only at the edges
// (CLI main, GUI session). Anomalies inside traces are counted in ImportStats, never thrown.
#include <stdexcept>
#include <string>

namespace gpumem {

class Error : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

// The input could not be read as the format it claims (or any format): bad magic, corrupt chunk,
// unsupported version, malformed field. The message names the file and byte offset or field.
class FormatError : public Error {
public:
    using Error::Error;
};

// The operating system refused a file operation (missing file, permission, disk full).
class IoError : public Error {
public:
    using Error::Error;
};

// A caller passed an invalid argument (bad spec string, unknown option). The CLI maps it to exit 2.
class UsageError : public Error {
public:
    using Error::Error;
};

} // namespace gpumem
