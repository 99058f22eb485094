#include "planner/CommandFlags.h"

namespace dtc {

std::string CommandFlags::value(const std::string& flag, const std::string& fallback) const {
  auto it = values.find(flag);
  return it == values.end() || it->second.empty() ? fallback : it->second.back();
}

StatusOr<CommandFlags> takeCommandFlags(const std::vector<std::string>& args,
                                        const std::set<std::string>& valued,
                                        const std::set<std::string>& switches,
                                        const std::string& command) {
  CommandFlags flags;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    const size_t eq = arg.find('=');
    const std::string flag = arg.substr(0, eq);
    if (switches.count(arg)) {
      flags.switches.insert(arg);
    } else if (valued.count(flag)) {
      if (eq != std::string::npos)
        flags.values[flag].push_back(arg.substr(eq + 1));
      else if (i + 1 < args.size())
        flags.values[flag].push_back(args[++i]);
      else
        return Status::InvalidInput(command + ": " + flag + " needs a value");
    } else {
      flags.rest.push_back(arg);
    }
  }
  return flags;
}

}  // namespace dtc
