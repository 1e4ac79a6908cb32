// The HTML report's interface is public: include/memkit/report_html.hpp. This path
// stays for the sources that include it by it.
#pragma once

#include "memkit/report_html.hpp"
