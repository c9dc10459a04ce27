#include "importers/detail/json_cut.h"

#include <vector>

namespace gpumem::detail {

namespace {
    bool blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }
    bool delimiter(char c)
    {
        return blank(c) || c == ',' || c == ':' || c == ']' || c == '}' || c == '[' || c == '{' || c == '"';
    }
} // namespace

std::string JsonCut::where(std::string_view listKey) const
{
    const std::string list(listKey);
    auto topLevel = [&] {
        if (token == Token::Key && member.empty())
            return std::string(" (in a top-level key)");
        return member.empty() ? std::string(" (between top-level keys)") : " (in the top-level \"" + member + "\")";
    };
    switch (region) {
    case Region::BeforeList:
        return "before \"" + list + "\" began" + topLevel();
    case Region::AfterList:
        return "after " + list + " closed" + topLevel();
    case Region::InList:
        break;
    }
    if (!insideElement)
        return completeElements == 0 ? "before " + list + "[0]"
                                     : "after " + list + "[" + std::to_string(completeElements - 1) + "]";
    const char* in = token == Token::Key ? "in a key inside "
        : token == Token::String         ? "in a string inside "
        : token == Token::Number         ? "in a number inside "
        : token == Token::Literal        ? "in true/false/null inside "
                                         : "inside ";
    return in + list + "[" + std::to_string(completeElements) + "]";
}

JsonCut locateJsonCut(std::string_view j, std::string_view listKey)
{
    JsonCut c;
    c.size = j.size();
    struct Level {
        bool object = false;
        bool expectKey = false; // an object after '{' or ',': the next string is a key
    };
    std::vector<Level> stack;
    bool started = false, listOpen = false, listClosed = false;
    // A value ended just before byte `end` at the current depth.
    auto valueDone = [&](std::size_t end) {
        if (stack.size() == 1) {
            c.membersEnd = end;
            c.member.clear();
        } else if (stack.size() == 2 && listOpen && !listClosed) {
            ++c.completeElements;
            c.elementsEnd = end;
        }
    };
    const std::size_t n = j.size();
    std::size_t i = 0;
    JsonCut::Token token = JsonCut::Token::Structure;
    while (i < n) {
        const char ch = j[i];
        if (blank(ch)) {
            ++i;
            continue;
        }
        if (stack.empty() && (started || ch != '{'))
            return c; // bytes after the top-level object, or no object: damaged, not cut
        switch (ch) {
        case '{':
        case '[':
            if (stack.size() == 1 && ch == '[' && !listOpen && c.member == listKey) {
                listOpen = true;
                c.elementsEnd = i + 1;
            }
            stack.push_back({ ch == '{', ch == '{' });
            started = true;
            ++i;
            break;
        case '}':
        case ']':
            if (stack.back().object != (ch == '}'))
                return c; // a bracket closes the wrong container: damaged
            stack.pop_back();
            ++i;
            if (stack.size() == 1 && listOpen && !listClosed && c.member == listKey)
                listClosed = true;
            if (!stack.empty())
                valueDone(i);
            break;
        case '"': {
            const bool key = stack.back().object && stack.back().expectKey;
            const std::size_t start = ++i;
            while (i < n && j[i] != '"')
                i += j[i] == '\\' ? 2 : 1;
            if (i >= n) {
                token = key ? JsonCut::Token::Key : JsonCut::Token::String;
                i = n;
                break;
            }
            const std::string_view text = j.substr(start, i - start);
            ++i;
            if (key) {
                stack.back().expectKey = false;
                if (stack.size() == 1)
                    c.member = std::string(text);
            } else {
                valueDone(i);
            }
            break;
        }
        case ',':
            stack.back().expectKey = stack.back().object;
            ++i;
            break;
        case ':':
            ++i;
            break;
        default: { // a number or true/false/null
            const bool number = ch == '-' || (ch >= '0' && ch <= '9');
            while (i < n && !delimiter(j[i]))
                ++i;
            if (i >= n)
                token = number ? JsonCut::Token::Number : JsonCut::Token::Literal;
            else
                valueDone(i);
            break;
        }
        }
    }
    if (stack.empty())
        return c; // a whole document
    c.cut = true;
    c.token = token;
    c.region = !listOpen ? JsonCut::Region::BeforeList
        : listClosed     ? JsonCut::Region::AfterList
                         : JsonCut::Region::InList;
    c.insideElement = c.region == JsonCut::Region::InList
        && (stack.size() > 2 || (stack.size() == 2 && token != JsonCut::Token::Structure));
    return c;
}

std::string JsonArrayCut::where(std::string_view element) const
{
    const std::string name(element);
    if (!insideElement)
        return completeElements == 0 ? "before " + name + " 0"
                                     : "after " + name + " " + std::to_string(completeElements - 1);
    const char* in = token == JsonCut::Token::String ? "in a string inside "
        : token == JsonCut::Token::Number            ? "in a number inside "
        : token == JsonCut::Token::Literal           ? "in true/false/null inside "
                                                     : "inside ";
    return in + name + " " + std::to_string(completeElements);
}

JsonArrayCut locateJsonArrayCut(std::string_view j)
{
    JsonArrayCut c;
    c.size = j.size();
    std::string open; // the unclosed containers, '[' or '{', outermost first
    bool started = false;
    auto elementDone = [&](std::size_t end) {
        if (open.size() == 1) {
            ++c.completeElements;
            c.elementsEnd = end;
        }
    };
    for (std::size_t i = 0; i < j.size();) {
        const char ch = j[i];
        if (blank(ch)) {
            ++i;
            continue;
        }
        if (open.empty() && (started || ch != '[')) {
            c.damage = i; // not an array, or bytes after it
            return c;
        }
        started = true;
        c.token = JsonCut::Token::Structure;
        if (ch == '[' || ch == '{') {
            open += ch;
            if (open.size() == 1)
                c.elementsEnd = i + 1;
            ++i;
        } else if (ch == ']' || ch == '}') {
            if (open.back() != (ch == ']' ? '[' : '{')) {
                c.damage = i;
                return c;
            }
            open.pop_back();
            elementDone(++i);
        } else if (ch == '"') {
            for (++i; i < j.size() && j[i] != '"';)
                i += j[i] == '\\' ? 2 : 1;
            if (i >= j.size())
                c.token = JsonCut::Token::String;
            else
                elementDone(++i); // (a key inside an object element is at depth 2: no effect)
        } else if (ch == ',' || ch == ':') {
            ++i;
        } else {
            const bool number = ch == '-' || (ch >= '0' && ch <= '9');
            while (i < j.size() && !delimiter(j[i]))
                ++i;
            if (i >= j.size())
                c.token = number ? JsonCut::Token::Number : JsonCut::Token::Literal;
            else
                elementDone(i);
        }
    }
    if (!started)
        c.damage = 0; // blank: no array at all
    if (open.empty())
        return c;
    c.cut = true;
    c.insideElement = open.size() > 1 || c.token != JsonCut::Token::Structure;
    return c;
}

} // namespace gpumem::detail
