#include "engines/resp_client/reply.h"

#include <cctype>

namespace warden::engines::resp_client {
namespace {

void render(const Reply& r, std::string& out, std::size_t max_bytes) {
  if (out.size() > max_bytes) return;
  switch (r.type) {
    case Reply::Type::status:
      out += r.text;
      return;
    case Reply::Type::error:
      out += "(error) " + r.text;
      return;
    case Reply::Type::integer:
      out += "(integer) " + std::to_string(r.integer);
      return;
    case Reply::Type::nil:
      out += "(nil)";
      return;
    case Reply::Type::bulk:
      out += '"';
      for (char c : r.text) {
        if (out.size() > max_bytes) break;
        const auto u = static_cast<unsigned char>(c);
        if (std::isprint(u) != 0 && c != '"' && c != '\\') {
          out += c;
        } else {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\x";
          out += kHex[u >> 4];
          out += kHex[u & 0xf];
        }
      }
      out += '"';
      return;
    case Reply::Type::array:
      out += '[';
      for (std::size_t i = 0; i < r.elements.size() && out.size() <= max_bytes; ++i) {
        if (i > 0) out += ", ";
        render(r.elements[i], out, max_bytes);
      }
      out += ']';
      return;
  }
}

Reply make(Reply::Type type) {
  Reply r;
  r.type = type;
  return r;
}

}  // namespace

std::string_view Reply::error_code() const {
  if (type != Type::error) return {};
  const std::string_view t = text;
  return t.substr(0, t.find(' '));
}

std::string Reply::describe(std::size_t max_bytes) const {
  std::string out;
  render(*this, out, max_bytes);
  if (out.size() > max_bytes) {
    out.resize(max_bytes);
    out += "...";
  }
  return out;
}

Reply status_reply(std::string text) {
  Reply r = make(Reply::Type::status);
  r.text = std::move(text);
  return r;
}

Reply error_reply(std::string text) {
  Reply r = make(Reply::Type::error);
  r.text = std::move(text);
  return r;
}

Reply integer_reply(std::int64_t value) {
  Reply r = make(Reply::Type::integer);
  r.integer = value;
  return r;
}

Reply bulk_reply(std::string text) {
  Reply r = make(Reply::Type::bulk);
  r.text = std::move(text);
  return r;
}

Reply nil_reply() { return make(Reply::Type::nil); }

Reply array_reply(std::vector<Reply> elements) {
  Reply r = make(Reply::Type::array);
  r.elements = std::move(elements);
  return r;
}

}  // namespace warden::engines::resp_client
