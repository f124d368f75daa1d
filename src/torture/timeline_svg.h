// torture/timeline_svg.h — a run's history as a picture a person can open in a
// browser: one lane per client, a bar per hold (the resource's view: first write to
// last write, labelled with the token; green when every write was accepted, red when
// one was rejected), thin marks at each rejected write, and shaded bands with labels
// for the nemesis' faults (over the client's lane, or across all lanes for a server
// fault). Pure: history in, SVG text out.
#pragma once

#include <string>
#include <vector>

#include "torture/history.h"

namespace warden::torture {

struct TimelineOptions {
  std::string title;  // e.g. the command line of the run
  int clients = 0;    // lanes (clients with no events get an empty lane)
  int width_px = 1200;
};

std::string timeline_svg(const std::vector<Event>& history, const TimelineOptions& options);

}  // namespace warden::torture
