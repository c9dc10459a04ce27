# What `cmake --install` puts where (GNUInstallDirs), and the .deb `cpack` builds from it
# (docs/install.md):
#   bin/gpumem, bin/gpumem-gui               cli/, gui/
#   lib/libgpumem_tracer.so                  tracer/ (where the CUDA toolkit was found)
#   share/gpumem/python/                     tracer/python, for `gpumem record --annotate-modules`
#   share/gpumem/traces/                     the sample trace (traces/)
#   share/doc/gpumem/                        README.md and docs/
#   share/man/man1/gpumem*.1.gz              made by help2man from the help text
#   share/bash-completion/completions/gpumem cli/gpumem.bash (asks `gpumem __complete`)
# The installed gpumem finds the tracer and the helper relative to its own folder (tracer/CMakeLists.txt).

install(FILES ${PROJECT_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${PROJECT_SOURCE_DIR}/traces/mlp_train.jsonl ${PROJECT_SOURCE_DIR}/traces/README.md
  DESTINATION ${CMAKE_INSTALL_DATADIR}/gpumem/traces)
install(FILES ${PROJECT_SOURCE_DIR}/cli/gpumem.bash DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions
  RENAME gpumem)

# Man pages: gpumem(1) from `gpumem --help`, gpumem-VERB(1) from `gpumem help VERB`, gpumem-gui(1)
# from `gpumem-gui --help`, made at build time by cmake/GpumemManPages.cmake.
find_program(GPUMEM_HELP2MAN help2man)
set(_man_default OFF)
if(GPUMEM_HELP2MAN)
  set(_man_default ON)
endif()
option(GPUMEM_BUILD_MAN_PAGES "Make man pages from the help text with help2man" ${_man_default})
if(GPUMEM_BUILD_MAN_PAGES AND NOT GPUMEM_HELP2MAN)
  message(FATAL_ERROR "GPUMEM_BUILD_MAN_PAGES=ON needs help2man: apt-get install help2man")
endif()
if(GPUMEM_BUILD_MAN_PAGES)
  set(_man_dir ${PROJECT_BINARY_DIR}/man)
  set(_man_depends gpumem ${PROJECT_SOURCE_DIR}/cmake/GpumemManPages.cmake)
  set(_man_gui "")
  if(TARGET gpumem-gui)
    list(APPEND _man_depends gpumem-gui)
    set(_man_gui "$<TARGET_FILE:gpumem-gui>")
  endif()
  add_custom_command(OUTPUT ${_man_dir}/man1.stamp
    COMMAND ${CMAKE_COMMAND} -DGPUMEM=$<TARGET_FILE:gpumem> "-DGPUMEM_GUI=${_man_gui}" -DHELP2MAN=${GPUMEM_HELP2MAN}
      -DOUT=${_man_dir}/man1 -P ${PROJECT_SOURCE_DIR}/cmake/GpumemManPages.cmake
    COMMAND ${CMAKE_COMMAND} -E touch ${_man_dir}/man1.stamp
    DEPENDS ${_man_depends}
    COMMENT "Making the man pages from the help text (help2man)")
  add_custom_target(gpumem-man-pages ALL DEPENDS ${_man_dir}/man1.stamp)
  install(DIRECTORY ${_man_dir}/man1/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1 FILES_MATCHING PATTERN "*.1.gz")
endif()

# The .deb: `cpack --preset ci` (or `cpack -G DEB` in a build folder) writes gpumem_VERSION_ARCH.deb.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME gpumem)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION "gpumem reads GPU memory traces (PyTorch memory snapshots and profiler traces, XLA
xplane files, RMM logs, Nsight Systems exports and its own CUPTI tracer's .gmt files) and
answers what was live at the peak and who allocated it, how much reserved memory was
fragmentation, and what other allocator settings, policies or GPU sizes would have done.
Contains the command-line tool gpumem, the Qt 6 viewer gpumem-gui and, where built with the
CUDA toolkit, the tracer libgpumem_tracer.so for `gpumem record`.")
if(NOT CPACK_DEBIAN_PACKAGE_MAINTAINER)
  set(CPACK_DEBIAN_PACKAGE_MAINTAINER "The gpumem developers")
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3-torch, chromium")
# Depends from the binaries' shared libraries (dpkg-shlibdeps, in dpkg-dev; CPack also needs `file`).
# CPack passes --ignore-missing-info, so libcupti, which comes from NVIDIA's toolkit and not from a
# Debian package, adds no dependency: the CUDA program being traced brings its own.
find_program(GPUMEM_DPKG_SHLIBDEPS dpkg-shlibdeps)
find_program(GPUMEM_FILE_PROGRAM file)
if(GPUMEM_DPKG_SHLIBDEPS AND GPUMEM_FILE_PROGRAM)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  message(WARNING "dpkg-shlibdeps or file not found: the .deb would have no Depends; apt-get install dpkg-dev file")
endif()
include(CPack)
