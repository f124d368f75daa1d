// torture/resource_link.h — a connection to the torture resource (resource.h): one
// request line out, one reply line back.
#pragma once

#include <string>

namespace warden::torture {

class ResourceLink {
 public:
  // Throws std::runtime_error if the resource's socket cannot be reached.
  explicit ResourceLink(const std::string& socket_path);
  ~ResourceLink();
  ResourceLink(const ResourceLink&) = delete;
  ResourceLink& operator=(const ResourceLink&) = delete;

  // Sends `line` and returns the reply (without its newline). Throws
  // std::runtime_error if the resource went away.
  std::string ask(const std::string& line);

 private:
  int fd_ = -1;
  std::string in_;
};

}  // namespace warden::torture
