#include "analyze/source_lines.h"

#include "analyze/code_tree.h"
#include "core/byte_total.h"
#include "core/display_width.h"
#include "core/units.h"

#include <algorithm>
#include <ostream>
#include <set>
#include <unordered_map>

namespace gpumem::analyze {

namespace {
    std::vector<std::string_view> components(std::string_view path, std::string& storage)
    {
        storage.assign(path);
        std::replace(storage.begin(), storage.end(), '\\', '/');
        std::vector<std::string_view> parts;
        std::string_view s = storage;
        while (!s.empty()) {
            const auto slash = s.find('/');
            const auto part = s.substr(0, slash);
            if (!part.empty() && part != ".")
                parts.push_back(part);
            if (slash == std::string_view::npos)
                break;
            s.remove_prefix(slash + 1);
        }
        return parts;
    }
    std::string_view baseName(std::string_view path)
    {
        const auto slash = path.find_last_of("/\\");
        return slash == std::string_view::npos ? path : path.substr(slash + 1);
    }
} // namespace

bool sameSourceFile(std::string_view recorded, std::string_view given)
{
    std::string a, b;
    const auto x = components(recorded, a), y = components(given, b);
    if (x.empty() || y.empty())
        return false;
    const std::size_t n = std::min(x.size(), y.size());
    return std::equal(x.end() - static_cast<std::ptrdiff_t>(n), x.end(), y.end() - static_cast<std::ptrdiff_t>(n));
}

SourceLines attributeSourceLines(const Trace& trace, std::span<const std::size_t> indices, std::string_view path)
{
    SourceLines out;
    out.given = std::string(path);
    // Which recorded file names are the file: by path suffix, else by a base name only one file has.
    std::set<StringId> matching, sameBase;
    std::set<std::string_view> baseNameFiles;
    for (const auto& f : trace.frames()) {
        const auto file = trace.str(f.file);
        if (sameSourceFile(file, path))
            matching.insert(f.file);
        else if (!file.empty() && baseName(file) == baseName(path)) {
            sameBase.insert(f.file);
            baseNameFiles.insert(file);
        }
    }
    if (matching.empty() && baseNameFiles.size() == 1)
        matching = sameBase;
    for (auto id : matching)
        out.recordedFiles.emplace_back(trace.str(id));
    std::sort(out.recordedFiles.begin(), out.recordedFiles.end());

    const auto& m = trace.memory();
    const auto allocations = trace.allocations();
    std::unordered_map<SiteId, std::optional<std::int32_t>> lineOfSite; // innermost frame in the file
    for (auto i : indices) {
        if (i >= allocations.size() || allocations[i].allocEvent == kNoIndex)
            continue;
        const auto ev = allocations[i].allocEvent;
        const Bytes size = m.size[ev];
        out.liveBytes = addSaturated(out.liveBytes, size);
        ++out.liveBlocks;
        const SiteId site = m.site[ev];
        auto it = lineOfSite.find(site);
        if (it == lineOfSite.end()) {
            std::optional<std::int32_t> line;
            if (site != 0 && site < trace.siteCount())
                for (FrameId fid : trace.siteFrames(site))
                    if (const auto& f = trace.frames()[fid]; matching.count(f.file)) {
                        line = f.line;
                        break;
                    }
            it = lineOfSite.emplace(site, line).first;
        }
        if (!it->second)
            continue;
        auto& l = out.lines[*it->second];
        l.bytes = addSaturated(l.bytes, size);
        ++l.blocks;
        out.attributedBytes = addSaturated(out.attributedBytes, size);
        ++out.attributedBlocks;
    }
    return out;
}

void writeSourceLines(const SourceLines& s, std::string_view source, std::size_t width, std::ostream& out)
{
    width = std::max<std::size_t>(width, 60);
    constexpr std::size_t kNumbers = 11 + 8 + 7 + 2; // bytes, blocks, line number, two spaces
    out << padLeft("live", 11) << padLeft("blocks", 8) << padLeft("line", 7) << "  " << "source\n";
    std::int32_t number = 0;
    std::size_t at = 0;
    while (at < source.size()) {
        auto end = source.find('\n', at);
        if (end == std::string_view::npos)
            end = source.size();
        std::string text(source.substr(at, end - at));
        at = end + 1;
        if (!text.empty() && text.back() == '\r')
            text.pop_back();
        std::string expanded; // tabs as 4 spaces, so the columns the cut counts are the ones a terminal shows
        for (char c : text)
            expanded += c == '\t' ? std::string("    ") : std::string(1, c);
        ++number;
        const auto it = s.lines.find(number);
        const bool has = it != s.lines.end();
        out << padLeft(has ? formatBytes(it->second.bytes) : std::string(), 11) << padLeft(has ? std::to_string(it->second.blocks) : std::string(), 8)
            << padLeft(std::to_string(number), 7) << "  " << cutToColumns(expanded, width - kNumbers) << '\n';
    }
    if (auto it = s.lines.find(0); it != s.lines.end())
        out << padLeft(formatBytes(it->second.bytes), 11) << padLeft(std::to_string(it->second.blocks), 8) << padLeft("?", 7)
            << "  (frames in the file without a line number)\n";
    // Lines past the end of the file (the file changed since the trace was recorded): said, not dropped.
    for (const auto& [line, l] : s.lines)
        if (line > number)
            out << padLeft(formatBytes(l.bytes), 11) << padLeft(std::to_string(l.blocks), 8) << padLeft(std::to_string(line), 7)
                << "  (past the end of the file: it changed since the trace was recorded?)\n";
}

} // namespace gpumem::analyze
