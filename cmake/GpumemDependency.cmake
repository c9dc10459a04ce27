# gpumem_require_package(<name> <debian-package> [find_package args…]): a required dependency that
# stops configuration with the Debian package to install when it is missing.
macro(gpumem_require_package name debian)
  find_package(${name} QUIET ${ARGN})
  set_package_properties(${name} PROPERTIES TYPE REQUIRED PURPOSE "apt-get install ${debian}")
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR "${name} not found: apt-get install ${debian}")
  endif()
endmacro()
