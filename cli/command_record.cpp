// gpumem record [-o DIR] [--annotate-modules] -- CMD ARGS… — runs a command with the CUPTI/NVTX
// tracer attached (tracer/launcher.h, docs/tracer.md) and lists the .gmt files it wrote.
#include "cli/command.h"
#include "core/error.h"

#if GPUMEM_HAVE_TRACER
#include "tracer/launcher.h"
#endif

#include <iostream>

namespace gpumem::cli {

namespace {
    class RecordCommand final : public Command {
    public:
        std::string_view name() const override { return "record"; }
        std::string_view summary() const override { return "run a CUDA program with the tracer attached and write one .gmt per process"; }
        std::string_view synopsis() const override
        {
            return "record [-o DIR] [--annotate-modules] -- CMD ARGS...\n"
                   "       gpumem record --print-paths";
        }
        std::string_view details() const override
        {
            return "The program runs unchanged: CUDA_INJECTION64_PATH and NVTX_INJECTION64_PATH point at\n"
                   "libgpumem_tracer.so, which records allocations (device, pinned, managed, stream-ordered pools),\n"
                   "the virtual-memory calls of expandable segments, kernels and NVTX ranges. Each process that\n"
                   "initialises CUDA or NVTX writes DIR/gpumem.<host>.<pid>[.rank<RANK>][.local<LOCAL_RANK>].gmt.\n"
                   "--annotate-modules adds NVTX ranges named by nn.Module path (fwd:mod:…, bwd:mod:…) to PyTorch\n"
                   "programs, so allocations are attributed to modules. SIGINT/SIGTERM/SIGHUP/SIGQUIT are passed on;\n"
                   "the exit status is the program's (128+N when signal N ended it). The tracer library is found\n"
                   "through $GPUMEM_TRACER_LIBRARY, next to this executable, the install's lib folder relative to it\n"
                   "(../lib), or the build tree; --print-paths shows which library and Python helper a run would use.\n"
                   "Example: gpumem record -o traces --annotate-modules -- python train.py --steps 20";
        }
        void setup(po::options_description& o, po::positional_options_description& p) override
        {
            o.add_options()("output,o", po::value<std::string>()->default_value("."), "folder for the trace files (created if missing)")(
                "annotate-modules", "add NVTX ranges per nn.Module to PyTorch programs (tracer/python helper)")(
                "print-paths", "print the tracer library and the Python helper folder a run would use, and exit (1 when "
                               "the library is not found)")(
                "command", po::value<std::vector<std::string>>(), "the command and its arguments (after --)");
            p.add("command", -1);
        }
        int run(const po::variables_map& vm, std::ostream& out, std::ostream& err) override
        {
            const bool printPaths = vm.count("print-paths") > 0;
            if (printPaths && vm.count("command"))
                throw UsageError("--print-paths takes no command (usage: gpumem record --print-paths)");
            if (!printPaths && !vm.count("command"))
                throw UsageError("no command given; usage: gpumem record [-o DIR] [--annotate-modules] -- CMD ARGS...");
#if GPUMEM_HAVE_TRACER
            if (printPaths) {
                // One "what: path" line each, so scripts (scripts/package-check.sh) can check an install.
                const std::string library = tracer::locateTracerLibrary();
                const std::string helper = tracer::locatePythonHelperDir();
                out << "libgpumem_tracer.so: " << (library.empty() ? "not found" : library) << '\n'
                    << "python helper: " << (helper.empty() ? "not found" : helper) << '\n';
                if (library.empty())
                    err << fitMessage("gpumem record: cannot find libgpumem_tracer.so; build it (GPUMEM_BUILD_TRACER=ON) or set "
                                      "GPUMEM_TRACER_LIBRARY to its path");
                return library.empty() ? kExitFailed : kExitOk;
            }
            tracer::RecordOptions options;
            options.command = vm["command"].as<std::vector<std::string>>();
            options.outputDir = vm["output"].as<std::string>();
            options.annotateModules = vm.count("annotate-modules") > 0;
            options.listing = &out;
            options.diagnostics = &err;
            out.flush();
            return tracer::runRecorded(options);
#else
            (void)out;
            (void)err;
            throw Error("this gpumem was built without the tracer (GPUMEM_BUILD_TRACER=OFF, CUDA toolkit with CUPTI not found); "
                        "rebuild with the CUDA toolkit installed to use 'gpumem record'");
#endif
        }
    };
} // namespace

std::unique_ptr<Command> makeRecordCommand() { return std::make_unique<RecordCommand>(); }

} // namespace gpumem::cli
