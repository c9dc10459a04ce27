# gpumem_require_package(<name> <debian-package> [find_package args…]): a required dependency that
# stops configuration with the Debian package to install when it is missing.
macro(gpumem_require_package name debian)
  find_package(${name} QUIET ${ARGN})
  set_package_properties(${name} PROPERTIES TYPE REQUIRED PURPOSE "apt-get install ${debian}")
  if(NOT ${name}_FOUND)
    message(FATAL_ERROR "${name} not found: apt-get install ${debian}")
  endif()
endmacro()

# gpumem_qt_packages_to_install(<out-var> <components…>): the Debian 12 packages that provide the Qt 6
# components a find_package(Qt6 COMPONENTS …) did not find, for the configure error. Qt6Charts loads
# Qt6OpenGL and Qt6OpenGLWidgets, whose CMake files are in libqt6opengl6-dev: only a Recommends of
# qt6-base-dev, so `apt-get install --no-install-recommends qt6-charts-dev` leaves Charts unloadable.
function(gpumem_qt_packages_to_install out)
  set(packages "")
  if(NOT Qt6_FOUND AND NOT Qt6_DIR)
    list(APPEND packages qt6-base-dev)
  endif()
  foreach(component IN LISTS ARGN)
    # find_package(Qt6 COMPONENTS …) gives up at the first component that fails to load: ask for the
    # ones after it one by one.
    if(NOT Qt6${component}_FOUND)
      find_package(Qt6${component} QUIET)
    endif()
    if(Qt6${component}_FOUND)
      continue()
    endif()
    if(component STREQUAL "Charts")
      if(NOT Qt6Charts_DIR)
        list(APPEND packages qt6-charts-dev)
      endif()
      find_package(Qt6OpenGL QUIET)
      find_package(Qt6OpenGLWidgets QUIET)
      if(NOT Qt6OpenGL_FOUND OR NOT Qt6OpenGLWidgets_FOUND)
        list(APPEND packages libqt6opengl6-dev)
      endif()
    elseif(component STREQUAL "Svg")
      list(APPEND packages qt6-svg-dev)
    else()
      list(APPEND packages qt6-base-dev) # Widgets, Test, Concurrent
    endif()
  endforeach()
  list(REMOVE_DUPLICATES packages)
  list(JOIN packages " " packages)
  set(${out} "${packages}" PARENT_SCOPE)
endfunction()
