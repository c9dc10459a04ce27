#pragma once
// Importers for what people have when there is no trace: the text of an out-of-memory report, found
// anywhere in a pasted log or traceback (docs/importers.md "Out-of-memory text"):
//   pytorch-oom-message     torch.OutOfMemoryError / RuntimeError "CUDA out of memory. Tried to allocate …",
//                           the current wording ("GPU 0 has a total capacity of … of which … is
//                           free. [Process N has … memory in use.] [Including non-PyTorch memory, this
//                           process has … memory in use.] [… allowed; ]Of the allocated memory … is
//                           allocated by PyTorch, [with … allocated in private pools (e.g., CUDA Graphs), ]and
//                           … is reserved by PyTorch but unallocated.", also with the "total capacty"
//                           typo of some versions) and the older one ("(GPU 0; … total capacity; … already allocated; …
//                           free; [… allowed; ]… reserved in total by PyTorch)", earlier "… cached)"); a
//                           torch.cuda.memory_summary() table in the same text adds its counters;
//   pytorch-memory-summary  a torch.cuda.memory_summary() table alone (torch/cuda/memory.py, memory_summary);
//   tf-oom-report           TensorFlow/XLA "OOM when allocating tensor with shape[…] and type … on …
//                           by allocator GPU_0_bfc", "Allocator (GPU_0_bfc) ran out of memory trying to
//                           allocate …", "Out of memory while trying to allocate N bytes." and the BFC
//                           allocator's dump (tsl/framework/bfc_allocator.cc, DumpMemoryLog: "Sum Total of
//                           in-use chunks: …", "total_region_allocated_bytes_: … memory_limit_: …" or
//                           "Total bytes in pool: …", "Stats:" with Limit/InUse/MaxInUse/…).
// Each gives a counters-only Trace: one Device, no alloc events, one Oom event (time 0, size = the
// request) when the text names the failed request, and counter series of one sample each at time 0 on
// that device, named as docs/importers.md lists ("Total Allocated", "Total Reserved", "Process In Use",
// "Device Free", "Other Process <pid> In Use", memory_stats() keys for memory_summary rows, …). Figures
// that PyTorch printed rounded (format_size: two decimals of KiB/MiB/GiB) are stored as the nearest byte
// and listed with their ± bound in metadata "oom_figures".
// Stateless free functions; safe to call from several threads at once.
#include "core/importer.h"

#include <memory>
#include <string>
#include <string_view>

namespace gpumem {

// True if `text` holds "CUDA out of memory. Tried to allocate " (or HIP's).
bool looksLikeTorchOomMessage(std::string_view text);
// True if `text` holds "PyTorch CUDA memory summary, device ID ".
bool looksLikeTorchMemorySummary(std::string_view text);
// True if `text` holds one of the TensorFlow/XLA out-of-memory lines or a BFC allocator dump.
bool looksLikeTfOomReport(std::string_view text);

// Import a whole text held in memory; `source` names it in messages. Throw FormatError naming the
// source, the 1-based line and the field for a figure that does not parse (a number cut off, an
// unknown unit such as "1.5 XiB", a missing unit), and when the text holds no such report at all. A
// message that stops between two fields (a log cut mid-line) keeps the fields before the cut and
// counts the anomaly "oom_message_truncated" (warning); figures that contradict each other beyond
// their rounding are the anomaly "oom_figures_inconsistent" (warning). Cancelled is never thrown
// (the texts are small).
Trace importTorchOomMessage(std::string_view text, const std::string& source, const LoadOptions& options = {});
Trace importTorchMemorySummary(std::string_view text, const std::string& source, const LoadOptions& options = {});
Trace importTfOomReport(std::string_view text, const std::string& source, const LoadOptions& options = {});

std::unique_ptr<Importer> makePytorchOomMessageImporter();
std::unique_ptr<Importer> makePytorchMemorySummaryImporter();
std::unique_ptr<Importer> makeTfOomReportImporter();

} // namespace gpumem
