// scantune: the command line client of scantuned. See client/cli.h.
#include <iostream>
#include <string>
#include <vector>

#include "client/cli.h"
#include "common/log.h"

int main(int argc, char** argv) {
  scantune::InitLogging();
  scantune::Cli cli(std::cout, std::cerr);
  return cli.Run(std::vector<std::string>(argv + 1, argv + argc));
}
