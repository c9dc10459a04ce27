# gpumem_set_warnings(<target>): the house warning set (design.md §9); -Werror when
# GPUMEM_WARNINGS_AS_ERRORS is on (the ci preset).
function(gpumem_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow)
  # GCC 12 reports false -Wrestrict warnings inside libstdc++'s std::string operator+ at -O3
  # (GCC bug 105329, fixed in GCC 13: "accessing 9223372036854775810 or more bytes"): eleven of them
  # in a Release build alarmed a first-time user, so the check is off there (the asan preset's
  # AddressSanitizer finds real overlapping copies).
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
    target_compile_options(${target} PRIVATE -Wno-restrict)
  endif()
  if(GPUMEM_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
