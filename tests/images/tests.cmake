# The release artifacts and the image recipe, without Docker:
# scripts/build-release.sh (the Dockerfile's build stage runs the same script)
# stages this build's artifacts, and tests/images/dockerfile_check.py checks
# deploy/images/Dockerfile's rules against what was staged.
if(NOT TESSERA_SANITIZE)
  add_test(NAME release_images_test
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/release_images_test.sh ${CMAKE_BINARY_DIR} ${CMAKE_BINARY_DIR}/release-stage)
  set_tests_properties(release_images_test PROPERTIES LABELS integration TIMEOUT 300)
endif()
# The images scripts/build-images.sh built from the Dockerfile (`make images`,
# which `make test` runs first): their config as declared, and each
# entrypoint runs inside its own root filesystem.
if(NOT TESSERA_SANITIZE)
  add_test(NAME release_images_run_test
           COMMAND ${CMAKE_CURRENT_LIST_DIR}/image_run_test.py ${CMAKE_BINARY_DIR}/images)
  set_tests_properties(release_images_run_test PROPERTIES LABELS integration TIMEOUT 600 SKIP_RETURN_CODE 77)
endif()
