# gpumem_set_warnings(<target>): the house warning set (design.md §9); -Werror when
# GPUMEM_WARNINGS_AS_ERRORS is on (the ci preset).
function(gpumem_set_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow)
  if(GPUMEM_WARNINGS_AS_ERRORS)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()
